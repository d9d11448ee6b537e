"""Per-visit attribution: a step visited more than once is judged per visit (checkers/visits.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.visits import event_visits
from killpoint.env.postgres import PostgresHandle
from killpoint.events import FaultFired, Point
from killpoint.faults.schedule import Schedule
from tests.gallery.mutants import BY_NAME
from tests.helpers.harness import harness_session

INSTALLMENT_BUGS = ("installment_step_key", "installment_amount_key", "installment_day_key")


@pytest.mark.parametrize("name", INSTALLMENT_BUGS)
def test_a_colliding_per_visit_key_fails_exactly_once_as_a_missing_effect(
        name: str, pg_server: PostgresHandle, tmp_path: Path) -> None:
    mutant = BY_NAME[name]
    with harness_session(pg_server, tmp_path / "runs", f"visits_{name}", steps=mutant.module) as s:
        said_first = [v.checker for v in s.crash_free_findings()]  # the crash-free run has the bug too
        trial = s.trial(Schedule.parse(mutant.schedule, s.agent.steps))
    assert said_first == ["exactly_once"], said_first
    verdicts = {v.checker: v for v in trial.verdicts}
    assert verdicts["exactly_once"].outcome == "fail", trial.verdicts
    assert verdicts["exactly_once"].evidence[0].startswith("missing x1: ledger"), verdicts["exactly_once"]
    assert "charge (visit 2)" in verdicts["exactly_once"].evidence[0]
    assert verdicts["bounded_rework"].outcome == "pass", verdicts["bounded_rework"]


def _start(inc: str, step: str, seq: int) -> Point:
    return Point(run_id="r", inc=inc, step=step, point="step.start", seq=seq, source="worker")


def _committed(inc: str, step: str, seq: int) -> Point:
    return Point(run_id="r", inc=inc, step=step, point="checkpoint.committed", seq=seq, source="worker")


def test_a_drain_after_a_loops_step_finished_resumes_into_the_next_visit() -> None:
    """think -> act -> think: SIGTERM at act's commit; the drained worker pauses at `think` (seq 3), and its
    successor's `think` is the loop's second visit, not a re-start of the first (a false bounded_rework)."""
    events = [_start("r#1", "think", 0), _committed("r#1", "think", 1), _start("r#1", "act", 1),
              _committed("r#1", "act", 2),
              FaultFired(run_id="r", inc="r#1", step="act", point="checkpoint.committed", action="term"),
              _start("r#2", "think", 3)]
    ev = Evidence("r", events=events, audit=[{"cursor": "think", "seq": 3, "status": "paused"}])
    assert event_visits(ev)[5] == ("think", 2)


def test_a_drain_before_the_step_committed_resumes_the_same_visit() -> None:
    """SIGTERM at think's start: the worker pauses at `think` without finishing it; the resume is visit 1."""
    events = [_start("r#1", "think", 0),
              FaultFired(run_id="r", inc="r#1", step="think", point="step.start", action="term"),
              _start("r#2", "think", 1)]
    ev = Evidence("r", events=events, audit=[{"cursor": "think", "seq": 1, "status": "paused"}])
    assert event_visits(ev)[2] == ("think", 1)
