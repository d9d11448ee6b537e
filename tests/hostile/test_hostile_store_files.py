"""Hostile files under `.killpoint/` (issue 29, item 5): a FIFO used to hang `stored-checkpoints` forever, a
symlink to /dev/zero read until the machine ran out of memory. Only regular files of bounded size are read;
anything else there is passed over like an unreadable file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from killpoint.run import bounded
from killpoint.run.bounded import read_bounded
from killpoint.run.checkpoint_store import CheckpointStore
from killpoint.run.store import FailureStore
from tests.helpers.sandbox import Sandbox

HOSTILE = {
    "fifo": lambda p: os.mkfifo(p),
    "dev-zero": lambda p: p.symlink_to("/dev/zero"),
    "directory": lambda p: p.mkdir(),
    "dangling-link": lambda p: p.symlink_to(p.parent / "nowhere"),
    "too-big": lambda p: p.write_bytes(b" " * (bounded.MAX_FILE_BYTES + 1)),
}


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_read_bounded_reads_only_small_regular_files(tmp_path: Path, make) -> None:
    path = tmp_path / "x.json"
    make(path)
    assert read_bounded(path) is None


def test_read_bounded_reads_a_small_file_and_one_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    assert read_bounded(tmp_path / "a.json") == b"{}" == read_bounded(tmp_path / "b.json")


def test_the_stores_pass_over_hostile_files(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    root.mkdir()
    for name, make in HOSTILE.items():
        make(root / f"crash_points-v1-{name}-01-plan.json")
    assert CheckpointStore(root).all() == []

    class Agent:
        module, digest = "m", "d"

    failures = FailureStore(tmp_path / "failures")
    failures.root.mkdir()
    for make in (HOSTILE["fifo"], HOSTILE["dev-zero"]):
        path = failures.path(Agent)  # type: ignore[arg-type]
        path.unlink(missing_ok=True)
        make(path)
        assert failures.read(Agent) == {}  # type: ignore[arg-type]


def test_stored_checkpoints_with_a_fifo_and_dev_zero_in_the_store_ends(sandbox: Sandbox) -> None:
    kept = sandbox.cwd / ".killpoint" / "checkpoints"
    kept.mkdir(parents=True)
    os.mkfifo(kept / "killpoint.reference_agent.steps-v1-0123456789ab-01-plan.json")
    (kept / "killpoint.reference_agent.steps-v1-0123456789ab-02-email.json").symlink_to("/dev/zero")
    try:
        proc = sandbox.run("run", "--scenario", "stored-checkpoints", "--out", str(sandbox.out), timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("stored-checkpoints hung on a FIFO in .killpoint/checkpoints")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), proc.stdout + proc.stderr  # nothing to resume: skipped, not crashed
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
