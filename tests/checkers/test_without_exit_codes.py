"""Drain and fencing judged from effects and checkpoints alone (`--exit-codes none`, a black-box worker's
default): a worker that dies of SIGTERM, or exits 0 after a takeover, is judged by what it left."""

from __future__ import annotations

from killpoint.checkers.evidence import Evidence
from tests.checkers.test_checkers import event, evidence, fault, run, with_options


def black_box(run_id: str) -> Evidence:
    ev = evidence(run_id)
    with_options(ev, {"grace": 5.0, "exit_codes": "none"})
    return ev


def _termed(ev: Evidence) -> Evidence:
    """SIGTERM at email's checkpoint, which the worker does not handle: it dies of it, a successor ends the run."""
    fault(ev, "term", "email", "checkpoint.writing", f"{ev.run_id}#1")
    ev.incarnations = [{"inc": f"{ev.run_id}#1", "role": "worker", "pid": 100, "exit_code": None, "signal": 15},
                       {"inc": f"{ev.run_id}#2", "role": "worker", "pid": 101, "exit_code": 0, "signal": None}]
    return ev


def test_a_worker_dying_of_sigterm_drains_when_the_step_was_safely_redone():
    ev = _termed(black_box("r-1"))
    verdict = run("drains_on_sigterm", ev)
    assert verdict.outcome == "pass", verdict
    assert "finished or safely redone" in verdict.reason
    # the same run held to killpoint's exit codes fails: it ended by a signal, not exit 0
    held = _termed(evidence("r-2"))
    assert run("drains_on_sigterm", held).outcome == "fail"


def test_a_step_redone_unsafely_after_sigterm_fails_the_drain():
    ev = _termed(black_box("r-1"))
    ev.effects = [*ev.effects, {**ev.effects[1], "id": "em_again"}]  # the email applied a second time
    verdict = run("drains_on_sigterm", ev)
    assert verdict.outcome == "fail" and "redone unsafely" in verdict.reason, verdict


def test_a_run_left_unfinished_after_sigterm_fails_the_drain():
    ev = _termed(black_box("r-1"))
    ev.final = {**ev.final, "status": "running", "cursor": "email"}
    assert run("drains_on_sigterm", ev).outcome == "fail"
    assert run("drains_on_sigterm", ev, None).outcome == "unknown"


def _zombie(ev: Evidence, zombie_writes_after: bool) -> Evidence:
    zombie, successor = f"{ev.run_id}#1", f"{ev.run_id}#2"
    fault(ev, "stop", "email", "effect.responded", zombie)
    ev.audit = ev.audit[:4] + [{"seq": 4, "cursor": "record", "status": "running", "app": successor},
                               {"seq": 5, "cursor": "done", "status": "done", "app": successor}]
    if zombie_writes_after:
        ev.audit.append({"seq": 4, "cursor": "record", "status": "running", "app": zombie})
    ev.incarnations.append({"inc": successor, "role": "successor", "pid": 101, "exit_code": 0, "signal": None})
    return ev


def test_a_zombie_exiting_0_without_writing_is_fenced_without_the_exit_code_convention():
    assert run("fenced_zombie", _zombie(black_box("r-1"), zombie_writes_after=False)).outcome == "pass"
    assert run("fenced_zombie", _zombie(evidence("r-2"), zombie_writes_after=False)).outcome == "fail"


def test_a_zombie_writing_after_takeover_fails_either_way():
    assert run("fenced_zombie", _zombie(black_box("r-1"), zombie_writes_after=True)).outcome == "fail"


def test_writes_that_name_no_worker_leave_fencing_unknown():
    ev = _zombie(black_box("r-1"), zombie_writes_after=False)
    ev.audit = [{**w, "app": "dbos_transact"} for w in ev.audit]
    assert run("fenced_zombie", ev).outcome == "unknown"


def test_a_fault_at_a_committed_checkpoint_may_cost_the_next_step_one_repeat():
    ev = black_box("r-1")
    inc = f"{ev.run_id}#1"
    fault(ev, "db-crash", "charge", "checkpoint.committed", inc)
    for service, step in (("ledger", "charge"), ("mailer", "email"), ("mailer", "email")):
        ev.events.insert(-1, event({"type": "point", "run_id": ev.run_id, "inc": inc, "step": step,
                              "point": "effect.received", "source": service}))
    ev.attempts = [*ev.attempts, {"service": "mailer", "key": f"{ev.run_id}:email", "outcome": "deduplicated"}]
    base = evidence("baseline-1")
    assert run("bounded_rework", ev, base).outcome == "pass"
