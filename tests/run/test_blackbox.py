"""A black-box worker (`--worker-cmd`): a process the harness knows only by its command line. It speaks no
kill-point protocol, so it is held only where the fake services see it; the checkers still judge it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.helpers import REPO
from tests.helpers.sandbox import Sandbox

BLACK_BOX = f"{shlex.quote(sys.executable)} {shlex.quote(str(REPO / 'tests' / 'helpers' / 'black_box_worker.py'))} {{run_id}}"
"""The reference worker with no kill-point socket (tests/helpers/black_box_worker.py): forked from black-box
servers that preloaded it, as a user's Python worker is."""


def replay(sandbox: Sandbox, tmp_path: Path, schedule: str, *extra: str):
    """`killpoint replay` of one crash-points schedule on `BLACK_BOX` (also tests/run/test_blackbox_checkpoint.py)."""
    return sandbox.run("replay", "--scenario", "crash-points", "--schedule", schedule,
                         "--worker-cmd", BLACK_BOX, "--out", str(tmp_path), "--quiet", *extra)


def test_black_box_worker_killed_after_the_effect_resumes_exactly_once(sandbox: Sandbox, tmp_path: Path) -> None:
    out = replay(sandbox, tmp_path, "email:effect.applied:kill")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS     crash-points" in out.stdout
    assert "not fired" not in out.stdout and "never reached" not in out.stdout


def test_black_box_worker_without_keys_is_caught(sandbox: Sandbox, tmp_path: Path) -> None:
    out = replay(sandbox, tmp_path, "charge:effect.applied:kill", "--steps", "tests.gallery.mutants.no_key")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "exactly_once: fail" in out.stdout


def test_a_point_a_black_box_worker_never_reports_is_said_to_have_not_fired(sandbox: Sandbox, tmp_path: Path) -> None:
    out = replay(sandbox, tmp_path, "email:step.start:kill")
    assert "never reached" in out.stdout and "email:step.start:kill" in out.stdout, out.stdout + out.stderr
