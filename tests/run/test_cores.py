"""The cores a session may use (`run.cores`): a CPU quota caps the default `-j` (a CI job given 2 CPUs on a
64-core host runs 2 trials at once, not 64), and `WhileIdle` then reads the cgroup's own use, not the host's
idle cores. The cgroup trees are folders the tests write, laid out as the kernel's (v2, v1, a container that
sees its own cgroup as the root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from killpoint.run.cores import BusyCores, Quota, quota, usable


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def own(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "self-cgroup"
    path.write_text(text)
    return path


def test_v2_quota_of_the_own_cgroup_and_the_tightest_ancestor(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    write(root, {"cpu.max": "max 100000\n", "ci.slice/cpu.max": "300000 100000\n", "ci.slice/cpu.stat": "usage_usec 7\n",
                 "ci.slice/job-7/cpu.max": "max 100000\n", "ci.slice/job-7/cpu.stat": "usage_usec 2500000\nuser_usec 1\n"})
    found = quota(root, own(tmp_path, "0::/ci.slice/job-7\n"))
    assert found is not None and found.cores == 3.0
    assert found.usage == root / "ci.slice" / "cpu.stat"  # the CPU is counted where the quota is
    write(root, {"ci.slice/job-7/cpu.max": "150000 100000\n"})
    found = quota(root, own(tmp_path, "0::/ci.slice/job-7\n"))
    assert found is not None and found.cores == 1.5 and found.used() == 2.5


def test_a_container_that_sees_its_cgroup_as_the_root(tmp_path: Path) -> None:
    """/proc/self/cgroup names the host's path, which is not under the container's /sys/fs/cgroup."""
    root = tmp_path / "cg"
    write(root, {"cpu.max": "200000 100000\n", "cpu.stat": "usage_usec 1000\n"})
    found = quota(root, own(tmp_path, "0::/kubepods/burstable/pod1234/abcd\n"))
    assert found is not None and found.cores == 2.0 and found.used() == 0.001


def test_v1_quota_and_its_cpuacct_counter(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    write(root, {"cpu,cpuacct/docker/c1/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/docker/c1/cpu.cfs_period_us": "100000\n",
                 "cpu,cpuacct/docker/c1/cpuacct.usage": "3000000000\n",
                 "cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    found = quota(root, own(tmp_path, "4:memory:/docker/c1\n3:cpu,cpuacct:/docker/c1\n0::/\n"))
    assert found is not None and found.cores == 0.5 and found.used() == 3.0


@pytest.mark.parametrize("cgroup", ["0::/\n", "2:cpu,cpuacct:/\n0::/\n", ""])
def test_no_quota_no_limit(tmp_path: Path, cgroup: str) -> None:
    root = tmp_path / "cg"
    write(root, {"cpu.max": "max 100000\n", "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                 "cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    assert quota(root, own(tmp_path, cgroup)) is None
    assert usable(root, own(tmp_path, cgroup)) == len(os.sched_getaffinity(0))


def test_the_default_jobs_is_the_affinity_within_the_quota_rounded_up(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    write(root, {"cpu.max": "50000 100000\n"})
    assert usable(root, own(tmp_path, "0::/\n")) == 1  # half a core: one at a time, never none
    write(root, {"cpu.max": f"{100000 * 64} 100000\n"})
    assert usable(root, own(tmp_path, "0::/\n")) == len(os.sched_getaffinity(0))  # the affinity is tighter


def test_busy_cores_under_a_quota_are_the_cgroups_own(tmp_path: Path) -> None:
    """Between two looks the cgroup's counter does not move: no core busy, however busy the host is; then it
    moves by 8 CPU-seconds: busy."""
    stat = tmp_path / "cpu.stat"
    stat.write_text("usage_usec 1000000\n")
    busy = BusyCores(Quota(2.0, stat))
    stat.write_text("usage_usec 1000000\n")
    assert busy() == 0.0  # nothing used since: idle, however busy the host is
    stat.write_text("usage_usec 9000000\n")
    assert busy() > 0.0  # 8 CPU-seconds since: busy
