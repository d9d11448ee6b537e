"""How many cores this process may use, and how busy they were: the default `-j` and `WhileIdle`'s look.

1. `quota(root, own)`: the CPU quota of the cgroup this process is in, if any (cgroup v2 `cpu.max`, v1
   `cpu.cfs_quota_us` / `cpu.cfs_period_us`; the tightest of its cgroup and that cgroup's ancestors), as
   cores (`Quota.cores`, e.g. 2.0 for "200000 100000"), with the file that counts the CPU the cgroup used.
   None when no quota applies or nothing can be read (no cgroup file system, another OS).
2. `usable()`: the cores the scheduler lets this process run on (`sched_getaffinity`), and no more than its
   quota rounded up: a CI job given 2 CPUs on a 64-core host runs `-j 2`, not `-j 64`.
3. `BusyCores()`: on average since its last call, how many cores were busy: the cgroup's own use under a
   quota (the host's idle cores are not ours to widen into), else the whole machine's (`psutil.cpu_times`:
   another process's work counts).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
OWN_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Quota:
    """A CPU quota (flow step 1)."""

    cores: float
    """The quota in cores (quota / period)."""
    usage: Path | None
    """The file counting the cgroup's CPU time (v2 `cpu.stat`, its `usage_usec`; v1 `cpuacct.usage`, in
    nanoseconds), or None when it cannot be read."""

    def used(self) -> float | None:
        """The cgroup's CPU time so far, in seconds (None when it cannot be read)."""
        if self.usage is None:
            return None
        try:
            text = self.usage.read_text()
        except OSError:
            return None
        if self.usage.name == "cpu.stat":
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            return None
        return int(text.split()[0]) / 1e9


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _lineage(mount: Path, inner: str) -> list[Path]:
    """The cgroup's folder under `mount` and its ancestors up to `mount`, the cgroup first. A path that is
    not there (a container sees its own cgroup as the mount's root) leaves the mount's root alone."""
    parts = [p for p in inner.strip("/").split("/") if p]
    folders = [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [f for f in folders if f.is_dir()] or [mount]


def _tightest(folders: list[Path], limit: Callable[[Path], float | None],
              usage: Callable[[Path], Path | None]) -> Quota | None:
    """The smallest quota among `folders` (`limit(folder)`: its quota in cores, None where it has none), with
    the CPU counter of the folder that sets it."""
    best: Quota | None = None
    for folder in folders:
        cores = limit(folder)
        if cores is not None and (best is None or cores < best.cores):
            best = Quota(cores, usage(folder))
    return best


def _v2_limit(folder: Path) -> float | None:
    """`cpu.max` ("200000 100000": 2 cores; "max 100000": none)."""
    limit, _, period = (_read(folder / "cpu.max") or "").partition(" ")
    if not limit.isdigit() or not period.strip().isdigit() or int(period) <= 0:
        return None
    return int(limit) / int(period)


def _v1_limit(folder: Path) -> float | None:
    """`cpu.cfs_quota_us` / `cpu.cfs_period_us` (a quota of -1: none)."""
    limit, period = _read(folder / "cpu.cfs_quota_us") or "", _read(folder / "cpu.cfs_period_us") or ""
    if not limit.lstrip("-").isdigit() or not period.isdigit() or int(limit) <= 0 or int(period) <= 0:
        return None
    return int(limit) / int(period)


def _v2(root: Path, inner: str) -> Quota | None:
    return _tightest(_lineage(root, inner), _v2_limit,
                     lambda folder: folder / "cpu.stat" if (folder / "cpu.stat").exists() else None)


def _v1(root: Path, inner: str) -> Quota | None:
    mount = next((root / name for name in ("cpu,cpuacct", "cpu") if (root / name).is_dir()), None)
    if mount is None:
        return None
    return _tightest(_lineage(mount, inner), _v1_limit,
                     lambda folder: next((p for p in (folder / "cpuacct.usage",
                                                      root / "cpuacct" / folder.relative_to(mount) / "cpuacct.usage")
                                          if p.exists()), None))


def quota(root: Path = CGROUP_ROOT, own: Path = OWN_CGROUP) -> Quota | None:
    """Flow step 1."""
    text = _read(own)
    if not text:
        return None
    v1_path = None
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, inner = rest.partition(":")
        if hierarchy == "0" and not controllers:  # cgroup v2 (or the unified half of a hybrid)
            found = _v2(root, inner)
            if found is not None:
                return found
        elif "cpu" in controllers.split(","):
            v1_path = inner
    return _v1(root, v1_path) if v1_path is not None else None


def usable(root: Path = CGROUP_ROOT, own: Path = OWN_CGROUP) -> int:
    """Flow step 2."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = quota(root, own)
    if limit is not None:
        cores = min(cores, math.ceil(limit.cores - 1e-9))
    return max(1, cores)


class BusyCores:
    """Flow step 3: how many cores were busy on average since the last call (the first call measures from
    construction)."""

    def __init__(self, limit: Quota | None = None) -> None:
        limit = limit if limit is not None else quota()
        self._quota = limit if limit is not None and limit.used() is not None else None  # else the machine's
        self._last = self._read()

    def _read(self) -> tuple[float, float]:
        if self._quota is not None:
            return time.monotonic(), self._quota.used() or self._last[1]
        import psutil

        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        return time.monotonic(), sum(t) - idle

    def __call__(self) -> float:
        (then, busy_then), (now, busy_now) = self._last, self._read()
        self._last = (now, busy_now)
        return (busy_now - busy_then) / (now - then) if now > then else 0.0
