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


def _point(inc: str, step: str, point: str, seq: int | None = None, source: str = "worker") -> Point:
    return Point(run_id="r", inc=inc, step=step, point=point, seq=seq, source=source)


def test_a_kill_while_a_late_checkpoint_is_written_may_repeat_the_next_steps_request() -> None:
    """LangGraph's async durability: `email` sends its request while `plan`'s checkpoint is being written. A
    kill at plan's checkpoint.writing resumes at plan and email re-sends (deduplicated): one repeat, the
    kill's; the same repeat with the crash-free run committing plan before email's request is not excused."""
    from killpoint.checkers.process import bounded_rework

    def run(inc: str, late: bool) -> list:
        request = _point(inc, "email", "effect.received", source="resend")
        commit = _point(inc, "plan", "checkpoint.committed", 1)
        return [_point(inc, "plan", "step.start", 0), *((request, commit) if late else (commit, request)),
                _point(inc, "email", "step.start", 1), _point(inc, "email", "checkpoint.committed", 2)]

    for late in (True, False):
        base = Evidence("b", events=run("b#1", late), attempts=[{"service": "resend", "outcome": "applied"}])
        killed = [_point("r#1", "plan", "step.start", 0), _point("r#1", "email", "effect.received", source="resend"),
                  FaultFired(run_id="r", inc="r#1", step="plan", point="checkpoint.writing", action="kill"),
                  *run("r#2", True)]
        ev = Evidence("r", events=killed, attempts=[{"service": "resend", "outcome": "applied"},
                                                    {"service": "resend", "outcome": "deduplicated"}])
        verdict = bounded_rework(ev, base)
        assert verdict.outcome == ("pass" if late else "fail"), (late, verdict)


def test_a_thawed_zombies_request_no_step_claims_is_bounded_by_the_runs_faults() -> None:
    """A black-box worker (DBOS) frozen at a step's committed checkpoint: its successor redoes the tool call
    (applied) and the thawed zombie re-sends it, seen by the ledger with no step (deduplicated). One repeat
    after one `stop`: within bound, though no visit claims it (it was FAIL, "1 repeated after 0 faults").
    After one `kill`, two repeats no step claims (two incarnations re-sending) are more than it explains."""
    from killpoint.checkers.process import bounded_rework

    step = "refunds__model.request"

    def run(action: str, *unplaced: str) -> Evidence:
        events = [_point("r#1", step, "checkpoint.committed", 1, source="sql-barrier"),
                  FaultFired(run_id="r", inc="r#1", step=step, point="checkpoint.committed", action=action),
                  _point("r#2", step, "effect.received", source="ledger"),
                  _point("r#2", step, "checkpoint.committed", 2, source="sql-barrier"),
                  *(Point(run_id="r", inc=inc, step=None, point="effect.received", source="ledger")
                    for inc in unplaced)]
        attempts = [{"service": "ledger", "outcome": "applied"},
                    *({"service": "ledger", "outcome": "deduplicated"} for _ in unplaced)]
        return Evidence("r", events=events, attempts=attempts)

    once = bounded_rework(run("stop", "r#1"), None)
    assert once.outcome == "pass", once
    twice = bounded_rework(run("kill", "r#2", "r#3"), None)
    assert twice.outcome == "fail" and "the run: 2 repeated after 1 fault" in twice.reason, twice


def test_a_kill_in_one_parallel_branch_may_repeat_what_the_branch_beside_it_sent() -> None:
    """A graph's superstep runs `email` and `copy` side by side; a kill at email's request, after copy's went
    out, repeats copy's too on resume (deduplicated): one repeat for the branch beside the fault's. The same
    repeat is not excused when the crash-free run committed `copy` before `email` began (one after the other)."""
    from killpoint.checkers.process import bounded_rework

    def run(inc: str, parallel: bool) -> list:
        copy, email = (_point(inc, "copy", "effect.received", source="resend"),
                       _point(inc, "email", "effect.received", source="resend"))
        if parallel:
            return [copy, email, _point(inc, "copy", "checkpoint.committed", 1)]
        return [copy, _point(inc, "copy", "checkpoint.committed", 1), email, _point(inc, "email", "checkpoint.committed", 2)]

    for parallel in (True, False):
        base = Evidence("b", events=run("b#1", parallel), attempts=[{"service": "resend", "outcome": "applied"}] * 2)
        killed = [_point("r#1", "copy", "effect.received", source="resend"),
                  _point("r#1", "email", "effect.received", source="resend"),
                  FaultFired(run_id="r", inc="r#1", step="email", point="effect.received", action="kill"),
                  *run("r#2", True)]
        ev = Evidence("r", events=killed, attempts=[{"service": "resend", "outcome": "applied"},
                                                    {"service": "resend", "outcome": "applied"},
                                                    {"service": "resend", "outcome": "deduplicated"},
                                                    {"service": "resend", "outcome": "deduplicated"}])
        verdict = bounded_rework(ev, base)
        assert verdict.outcome == ("pass" if parallel else "fail"), (parallel, verdict)
