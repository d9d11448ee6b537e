"""A black-box worker (`--worker-cmd`) is held at its checkpoint points from outside, by the trigger of
harness/sqlbarrier.py: faults at `checkpoint.writing` and `checkpoint.committed` fire, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from killpoint.env import sqlbarrier
from tests.helpers.sandbox import Sandbox
from tests.run.test_blackbox import replay as _replay


def _events(tmp_path: Path) -> list[dict]:
    (history,) = tmp_path.glob("*/history.jsonl")
    return [json.loads(line) for line in history.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("schedule", ["charge:checkpoint.writing:kill", "email:checkpoint.writing:term",
                                      "charge:checkpoint.committed:kill", "charge:checkpoint.committed:stop"])
def test_a_black_box_worker_is_held_at_its_checkpoint_points(sandbox: Sandbox, tmp_path: Path, schedule: str) -> None:
    out = _replay(sandbox, tmp_path, schedule)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS     crash-points" in out.stdout
    assert "never reached" not in out.stdout, out.stdout
    step, point, action = schedule.split(":")
    events = _events(tmp_path)
    faults = [e for e in events if e["type"] == "fault"]
    assert [(e["step"], e["point"], e["action"]) for e in faults] == [(step, point, action)]
    ends = [e for e in events if e["type"] == "run.end" and e["run_id"] == faults[0]["run_id"]]
    assert ends and ends[0]["unfired"] == []


def test_a_kill_inside_the_checkpoint_transaction_commits_nothing(sandbox: Sandbox, tmp_path: Path) -> None:
    """The killed worker's backend waits inside COMMIT: it must be aborted, not let through. The charge
    step's checkpoint (seq 3) is written by the second incarnation, never by the killed first one."""
    out = _replay(sandbox, tmp_path, "charge:checkpoint.writing:kill")
    assert out.returncode == 0, out.stdout + out.stderr
    events = _events(tmp_path)
    run_id = next(e["run_id"] for e in events if e["type"] == "fault")
    committed = [e for e in events if e["type"] == "point" and e["run_id"] == run_id
                 and e["point"] == "checkpoint.committed" and e["step"] == "charge"]
    assert [(e["inc"], e["seq"]) for e in committed] == [(f"{run_id}#2", 3)]


def test_the_barrier_polls_fast_while_the_run_is_busy_and_backs_off_while_it_is_idle() -> None:
    """`sqlbarrier.next_interval`: every `POLL_SECONDS` while busy; idle, the wait doubles up to
    `IDLE_POLL_SECONDS` (a framework's worker idles in its own start and sleeps) and is short again at once
    when the run is busy again (a nudge, a held commit)."""
    waits, interval = [], sqlbarrier.POLL_SECONDS
    for busy in [True, True, *[False] * 8, True]:
        interval = sqlbarrier.next_interval(interval, busy)
        waits.append(interval)
    assert waits == [0.002, 0.002, 0.004, 0.008, 0.016, 0.032, 0.05, 0.05, 0.05, 0.05, 0.002]
