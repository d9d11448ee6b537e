"""Every checker fails on hand-made evidence that violates it and passes on evidence that does not; a checker
that raises is `unknown`; `combine` is three-valued (fail > unknown > pass, and nothing decided is unknown)."""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from killpoint.checkers import CHECKERS, CRASH_CHECKERS, Evidence, Verdict, combine, run_checkers
from killpoint.checkers.knobs import Replay, split
from killpoint.checkers.verdict import failed, passed, unknown
from killpoint.events import Escalate, Event, decode

STEPS = ("plan", "validate", "charge", "email", "record")


def event(fields: dict | None = None, /, **more: object) -> Event:
    """The event of kind `type` with these JSON fields, as the history reads it back."""
    e = decode({**(fields or {}), **more})
    assert e is not None, (fields, more)
    return e


def with_options(ev: Evidence, options: dict) -> None:
    """Give `ev` what a run that recorded `options` has (its knobs, volatile fields, replay and extras)."""
    ev.knobs, ev.volatile, ev.replay, ev.extra = split(options)


def evidence(run_id: str, **changes: object) -> Evidence:
    """A clean run of the reference agent as the harness records it (ids derived from the run id)."""
    charge_id, email_id = f"ch_{run_id}_charge", f"em_{run_id}_email"
    window = [{"role": "user", "content": "Plan the billing of invoice INV-1"}]
    state = {"invoice_id": "INV-1", "amount_cents": 12500, "charge_id": charge_id, "email_id": email_id,
             "recorded": True}
    inc = f"{run_id}#1"
    events: list[Event] = [event(type="run.begin", run_id=run_id), event(type="inc.start", run_id=run_id, inc=inc)]
    for step in STEPS:
        events.append(event(type="point", run_id=run_id, inc=inc, step=step, point="step.start"))
    events += [event(type="inc.end", run_id=run_id, inc=inc, exit_code=0, signal=None),
               event(type="run.end", run_id=run_id)]
    ev = Evidence(
        run_id=run_id,
        events=events,
        final={"run_id": run_id, "seq": 5, "version": 3, "cursor": "done", "status": "done", "state": state,
               "cost_usd": 0.0123},
        audit=[{"seq": n, "cursor": c, "status": "done" if c == "done" else "running", "app": inc}
               for n, c in enumerate((*STEPS, "done"))],
        attempts=[{"service": "ledger", "key": f"{run_id}:charge", "outcome": "applied"},
                  {"service": "mailer", "key": f"{run_id}:email", "outcome": "applied"}],
        effects=[{"service": "ledger", "key": f"{run_id}:charge", "id": charge_id,
                  "payload": {"account": "acct-42", "amount_cents": 12500}},
                 {"service": "mailer", "key": f"{run_id}:email", "id": email_id,
                  "payload": {"to": "a@example.com", "data": {"charge_id": charge_id}}}],
        model_requests=[{"order": 1, "model": "m", "system": None, "messages": window},
                        {"order": 2, "model": "m", "system": None,
                         "messages": [*window, {"role": "assistant", "content": "ok"},
                                      {"role": "user", "content": f"Validate for {run_id}"}]}],
        own_effects=[[run_id, "INV-1", 12500]],
        incarnations=[{"inc": inc, "role": "worker", "pid": 100, "exit_code": 0, "signal": None}],
    )
    with_options(ev, {"grace": 5.0})
    for k, v in changes.items():
        if k == "options":
            with_options(ev, v)  # type: ignore[arg-type]
        else:
            setattr(ev, k, v)
    return ev


BASE = evidence("baseline-1")


def run(name: str, ev: Evidence, base: Evidence | None = BASE) -> Verdict:
    verdict = CHECKERS[name](ev, base)
    assert verdict.checker == name
    return verdict


def fault(ev: Evidence, action: str, step: str, point: str, inc: str) -> None:
    ev.events.insert(-1, event(type="fault", run_id=ev.run_id, inc=inc, step=step, point=point, action=action,
                               nth=1))


NEEDS_A_FAULT = {"drains_on_sigterm": "term", "fenced_zombie": "stop", "commits_survive": "db-crash"}
"""Checkers a run without their fault does not exercise: `n/a` there, never a pass."""


def test_the_clean_run_passes_every_crash_checker_it_exercises() -> None:
    ev = evidence("run-2")
    verdicts = run_checkers(CRASH_CHECKERS, ev, BASE)
    assert [v.outcome for v in verdicts] == ["n/a" if c in NEEDS_A_FAULT else "pass" for c in CRASH_CHECKERS], verdicts
    assert all("not exercised" in v.reason for v in verdicts if v.outcome == "n/a")
    assert combine(verdicts) == "pass"


def test_checkers_with_nothing_to_judge_are_not_exercised_never_passed() -> None:
    """A db-crash only outside a checkpoint write, a run without service requests, and an agent that makes
    no effect at all: each checker had nothing to hold, so `n/a` (it once said pass)."""
    ev = evidence("run-2")
    _db_crash_at(ev, "step.start", 2)
    verdict = run("commits_survive", ev)
    assert verdict.outcome == "n/a" and "only at step.start" in verdict.reason, verdict
    ev, base = evidence("run-2"), evidence("run-1")
    ev.attempts, base.attempts = [], []
    verdict = run("retries_keep_keys", ev, base=base)
    assert verdict.outcome == "n/a" and "no service request" in verdict.reason, verdict
    ev.effects = base.effects = []
    ev.own_effects = base.own_effects = []
    verdict = run("exactly_once", ev, base=base)
    assert verdict.outcome == "n/a" and "neither" in verdict.reason, verdict
    base.own_effects = [{"id": 1}]  # an effect the crash-free run made and this one did not: judged, failed
    assert run("exactly_once", ev, base=base).outcome == "fail"


def test_a_zombie_nobody_took_over_from_and_a_cut_short_sigterm_are_not_exercised() -> None:
    ev = evidence("run-2")
    fault(ev, "stop", "email", "effect.responded", f"{ev.run_id}#1")  # thawed, it finished alone
    assert run("fenced_zombie", ev).outcome == "n/a"
    ev = evidence("run-2")
    fault(ev, "term", "record", "step.start", f"{ev.run_id}#1")
    fault(ev, "kill", "record", "step.start", f"{ev.run_id}#1")  # killed before it could drain
    verdict = run("drains_on_sigterm", ev)
    assert verdict.outcome == "n/a" and "not exercised" in verdict.reason, verdict


# Checkers whose violations need evidence of more than one run (or a scenario's own) are proven elsewhere.
COVERED_ELSEWHERE = {
    "refuses_newer_version": "tests/checkers/test_checkers.py",  # the version tests below
    "migrates_older_version": "tests/checkers/test_checkers.py",
    "faults_injected": "tests/checkers/test_checkers.py",
    "no_egress": "tests/checkers/test_no_egress.py",
    "decisions_hold": "tests/checkers/test_harsh_checkers.py",
    "invariants_hold": "tests/checkers/test_harsh_checkers.py",
    "same_as_serial": "tests/checkers/test_harsh_checkers.py",
}


def test_every_checker_is_covered_here() -> None:
    assert set(CHECKERS) == set(VIOLATIONS) | set(COVERED_ELSEWHERE)
    root = Path(__file__).resolve().parents[2]
    for name, where in COVERED_ELSEWHERE.items():  # a test there names the checker, and the test runs it
        bodies = re.split(r"^def ", (root / where).read_text(), flags=re.M)[1:]
        assert any(b.startswith("test_") and (f'"{name}"' in b or f"{name}(" in b) for b in bodies), \
            f"{name}: no test in {where} runs it"


def test_faults_injected_is_unknown_when_a_fault_was_missed_or_an_explicit_one_never_fired() -> None:
    ev = evidence("run-2")
    assert run("faults_injected", ev).outcome == "pass"
    ev.events.append(event(i=999, type="fault.missed", fault="x:checkpoint.writing:db-crash",
                           reason="database not owned"))
    missed = run("faults_injected", ev)
    assert missed.outcome == "unknown" and "database not owned" in missed.reason
    ev = evidence("run-2")
    ev.events.append(event(i=999, type="run.end", unfired=["email:effect.applied:kill@9"]))
    assert run("faults_injected", ev).outcome == "pass"  # generated schedules: counted, not decisive
    ev.replay = Replay(explicit=True)
    unfired = run("faults_injected", ev)
    assert unfired.outcome == "unknown" and "email:effect.applied:kill@9" in unfired.reason


# ---- one violation per checker: (checker, evidence change, words the reason must contain) ---------------

def _not_done(ev: Evidence) -> None:
    ev.final = {**ev.final, "cursor": "email", "status": "running"}  # type: ignore[dict-item]


def _liveness(ev: Evidence) -> None:
    ev.limit = "not done after 6 incarnations (bound 6)"


def _email_twice(ev: Evidence) -> None:  # a resumed email step without a key sends it again
    ev.effects.append({**ev.effects[1], "key": None, "id": "em_other"})


def _charge_missing(ev: Evidence) -> None:
    del ev.effects[0]


def _own_row_twice(ev: Evidence) -> None:
    ev.own_effects.append(list(ev.own_effects[0]))


def _other_state(ev: Evidence) -> None:
    ev.final = {**ev.final, "state": {**ev.final["state"], "amount_cents": 25000}}  # type: ignore[index]


def _rewind(ev: Evidence) -> None:
    ev.audit.insert(4, {"seq": 2, "cursor": "charge", "status": "running", "app": f"{ev.run_id}#2"})


def _redone_without_fault(ev: Evidence) -> None:
    ev.events.insert(3, event({"type": "point", "run_id": ev.run_id, "inc": f"{ev.run_id}#1", "step": "plan",
                         "point": "step.start"}))


def _other_context(ev: Evidence) -> None:  # a resumed validate sent a window the crash-free run never sent
    ev.model_requests[1] = {**ev.model_requests[1], "messages": ev.model_requests[1]["messages"][-1:]}


def _billed_twice(ev: Evidence) -> None:
    ev.final = {**ev.final, "cost_usd": 0.0246}  # type: ignore[dict-item]


def _term_escalated(ev: Evidence) -> None:
    inc = f"{ev.run_id}#1"
    fault(ev, "term", "charge", "step.start", inc)
    ev.events.insert(-1, event({"type": "escalate", "run_id": ev.run_id, "inc": inc, "grace": 5.0}))
    ev.incarnations[0] = {**ev.incarnations[0], "exit_code": None, "signal": 9}


def _term_exit_without_pause(ev: Evidence) -> None:
    fault(ev, "term", "charge", "step.start", f"{ev.run_id}#1")
    ev.audit = [w for w in ev.audit if w["status"] != "done"]  # exited 0 leaving 'running'


def _zombie_wrote(ev: Evidence) -> None:
    zombie, successor = f"{ev.run_id}#1", f"{ev.run_id}#2"
    fault(ev, "stop", "email", "effect.responded", zombie)
    ev.audit = ev.audit[:4] + [{"seq": 4, "cursor": "record", "status": "running", "app": successor},
                               {"seq": 5, "cursor": "done", "status": "done", "app": successor},
                               {"seq": 6, "cursor": "record", "status": "running", "app": zombie}]
    ev.incarnations.append({"inc": successor, "role": "successor", "pid": 101, "exit_code": 0, "signal": None})


def _zombie_exit_0(ev: Evidence) -> None:
    zombie, successor = f"{ev.run_id}#1", f"{ev.run_id}#2"
    fault(ev, "stop", "email", "effect.responded", zombie)
    ev.audit = ev.audit[:4] + [{"seq": 4, "cursor": "record", "status": "running", "app": successor},
                               {"seq": 5, "cursor": "done", "status": "done", "app": successor}]
    ev.incarnations.append({"inc": successor, "role": "successor", "pid": 101, "exit_code": 0, "signal": None})


def _term_took_new_work(ev: Evidence) -> None:  # ignored SIGTERM at charge and went on to email, record
    ev.events.insert(5, event({"type": "fault", "run_id": ev.run_id, "inc": f"{ev.run_id}#1", "step": "charge",
                         "point": "step.start", "action": "term", "nth": 1}))


def _db_crash_at(ev: Evidence, point: str, seq: int) -> None:
    inc = f"{ev.run_id}#1"
    ev.events.insert(-1, event({"type": "point", "run_id": ev.run_id, "inc": inc, "step": "validate", "point": point,
                          "seq": seq}))
    fault(ev, "db-crash", "validate", point, inc)


def _commit_lost(ev: Evidence) -> None:  # the crash took a committed write with it
    _db_crash_at(ev, "checkpoint.committed", 2)
    ev.audit = [w for w in ev.audit if w["seq"] != 2]


def _open_write_kept(ev: Evidence) -> None:  # a write still open at the crash was stored anyway
    _db_crash_at(ev, "checkpoint.writing", 2)


def _retry_new_key(ev: Evidence) -> None:  # a retry minted a fresh key
    ev.attempts.append({"service": "mailer", "key": f"{ev.run_id}:email:retry", "outcome": "applied"})


def _orphan(ev: Evidence) -> None:
    ev.leftovers = ["pid 4242 (run-2#1)"]


VIOLATIONS: dict[str, list[tuple[Callable[[Evidence], None], str]]] = {
    "completes": [(_not_done, "cursor 'email'"), (_liveness, "liveness"), (lambda ev: setattr(ev, "final", None),
                                                                           "no checkpoint")],
    "exactly_once": [(_email_twice, "done twice"), (_charge_missing, "never done"), (_own_row_twice, "done twice")],
    "same_final_state": [(_other_state, "differs"), (_not_done, "differs")],
    "no_rewind": [(_rewind, "went back from seq 3 to 2")],
    "bounded_rework": [(_redone_without_fault, "re-done")],
    "context_fidelity": [(_other_context, "never sent")],
    "cost_accounted": [(_billed_twice, "0.024600")],
    "drains_on_sigterm": [(_term_escalated, "grace period"), (_term_exit_without_pause, "without checkpointing"),
                          (_term_took_new_work, "started email, record")],
    "fenced_zombie": [(_zombie_wrote, "wrote a checkpoint after"), (_zombie_exit_0, "exited 0")],
    "no_orphans": [(_orphan, "still alive")],
    "commits_survive": [(_commit_lost, "committed before the crash and is gone"),
                        (_open_write_kept, "still open at the crash")],
    "retries_keep_keys": [(_retry_new_key, "never used")],
}

CASES = [(name, change, words) for name, changes in VIOLATIONS.items() for change, words in changes]


@pytest.mark.parametrize(("name", "change", "words"), CASES,
                         ids=[f"{n}-{c.__name__.strip('_')}" for n, c, _ in CASES])
def test_checker_fails_on_its_violation(name: str, change: Callable[[Evidence], None], words: str) -> None:
    ev = evidence("run-2")
    assert run(name, ev).outcome == ("n/a" if name in NEEDS_A_FAULT else "pass")
    change(ev)
    verdict = run(name, ev)
    assert verdict.outcome == "fail", verdict
    assert words in verdict.reason + " ".join(verdict.evidence), verdict


@pytest.mark.parametrize("name", ["exactly_once", "same_final_state", "context_fidelity", "cost_accounted"])
def test_comparing_checkers_without_baseline_are_unknown(name: str) -> None:
    assert run(name, evidence("run-2"), base=None).outcome == "unknown"


def test_faults_explain_rework_and_drain_passes() -> None:
    ev = evidence("run-2")
    _redone_without_fault(ev)
    fault(ev, "kill", "plan", "checkpoint.writing", f"{ev.run_id}#1")
    assert run("bounded_rework", ev).outcome == "pass"
    ev = evidence("run-2")
    fault(ev, "term", "record", "step.start", f"{ev.run_id}#1")
    ev.audit[-1] = {**ev.audit[-1], "status": "paused", "cursor": "record"}
    assert run("drains_on_sigterm", ev).outcome == "pass"
    with_options(ev, {"drain_expect": "exit"})  # a step longer than the deadline: exit 6 is a clean drain too
    ev.incarnations[0] = {**ev.incarnations[0], "exit_code": 6}
    assert run("drains_on_sigterm", ev).outcome == "pass"


def test_a_sigkill_after_a_grace_spent_waiting_for_a_cpu_is_unknown_not_fail() -> None:
    """A busy machine kept the worker from running for most of its grace: no evidence it ignores SIGTERM."""
    for waited, outcome in ((4.0, "unknown"), (0.2, "fail"), (None, "fail")):
        ev = evidence("run-2")
        _term_escalated(ev)
        at = next(i for i, e in enumerate(ev.events) if isinstance(e, Escalate))
        ev.events[at] = event({"type": "escalate", "run_id": ev.run_id, "inc": f"{ev.run_id}#1", "grace": 5.0,
                               "waited": waited})
        verdict = run("drains_on_sigterm", ev)
        assert verdict.outcome == outcome, (waited, verdict)
        assert outcome == "fail" or "waiting for a CPU" in verdict.reason


def test_a_drain_deadline_spent_waiting_for_a_cpu_is_unknown_not_fail() -> None:
    """A worker that exits 6 at its drain deadline (a step of 0.3 s left unfinished in 4 s) fails, unless
    its `drain.deadline` note says it spent a large share of the deadline waiting for a CPU: a loaded
    machine, not the agent, then made it miss the deadline."""
    for waited, outcome in ((1.5, "unknown"), (0.3, "fail"), (None, "fail")):
        ev = evidence("run-2")
        inc = f"{ev.run_id}#1"
        fault(ev, "term", "charge", "step.start", inc)
        ev.events.insert(-1, event(type="note", run_id=ev.run_id, inc=inc, note="drain.deadline",
                                   deadline_seconds=4.0, waited=waited))
        ev.incarnations[0] = {**ev.incarnations[0], "exit_code": 6}
        with_options(ev, {"grace": 5.0, "exit_codes": "killpoint", "drain_expect": "checkpoint"})
        verdict = run("drains_on_sigterm", ev)
        assert verdict.outcome == outcome, (waited, verdict)
        assert ("waiting for a CPU" in verdict.reason) == (outcome == "unknown"), verdict


def test_a_hang_spent_waiting_for_a_cpu_is_unknown_not_fail() -> None:
    """A worker still running when the time budget ran out fails `completes` as hung, unless it spent a
    large share of its life waiting for a CPU (a framework's import on a loaded machine): then unknown."""
    for age, waited, outcome in ((24.0, 15.0, "unknown"), (24.0, 1.0, "fail"), (24.0, None, "fail"),
                                 (None, 15.0, "fail")):
        ev = evidence("run-2", limit="hung: run-2#1 (last point none) still running, not done within 60s")
        ev.events.insert(-1, event(type="hung", run_id=ev.run_id, inc=f"{ev.run_id}#1", pid=100, last_point=None,
                                   stack=["no stack"], age=age, waited=waited))
        verdict = run("completes", ev)
        assert verdict.outcome == outcome, (age, waited, verdict)
        assert ("waiting for a CPU" in verdict.reason) == (outcome == "unknown"), verdict


def test_fenced_zombie_passes_when_fenced() -> None:
    ev = evidence("run-2")
    _zombie_exit_0(ev)
    ev.incarnations[0] = {**ev.incarnations[0], "exit_code": 4}
    assert run("fenced_zombie", ev).outcome == "pass"


def test_black_box_worker_rework_is_judged_by_its_repeated_effects() -> None:
    """No step.start points (a black-box worker): the repeated effects still bound the rework; with no
    service attempts either, there is nothing to judge by."""
    assert run("bounded_rework", evidence("run-2", events=[])).outcome == "pass"
    repeat = {"service": "ledger", "key": "run-2:charge", "outcome": "deduplicated"}
    ev = evidence("run-2", events=[])
    ev.attempts.append(repeat)
    assert run("bounded_rework", ev).outcome == "fail"  # a repeat with no fault to explain it
    assert run("bounded_rework", evidence("run-2", events=[], attempts=[])).outcome == "unknown"
    assert run("no_rewind", evidence("run-2", audit=[])).outcome == "unknown"


# ---- schema drift checkers need the seeded checkpoint in the options ------------------------------------

def refused(**changes: object) -> Evidence:
    seeded = '{"version": 4}'
    ev = evidence("run-2", final_raw=seeded, effects=[], attempts=[], model_requests=[],
                  options={"seeded_raw": seeded},
                  incarnations=[{"inc": "run-2#1", "role": "worker", "pid": 1, "exit_code": 3, "signal": None}])
    for k, v in changes.items():
        setattr(ev, k, v)
    return ev


def test_refuses_newer_version() -> None:
    assert run("refuses_newer_version", refused()).outcome == "pass"
    assert run("refuses_newer_version", evidence("run-2")).outcome == "unknown"
    for ev, words in [
        (refused(incarnations=[{"inc": "run-2#1", "exit_code": 0, "signal": None}]), "exit codes [0]"),
        (refused(final_raw='{"version": 3}'), "row changed"),
        (refused(model_requests=[{"messages": []}]), "model request"),
        (refused(effects=copy.deepcopy(BASE.effects)), "effect(s)"),
    ]:
        verdict = run("refuses_newer_version", ev)
        assert verdict.outcome == "fail" and words in " ".join(verdict.evidence), verdict


def test_migrates_older_version() -> None:
    options = {"state_version": 3, "seeded_version": 1}
    assert run("migrates_older_version", evidence("run-2", options=options)).outcome == "pass"
    assert run("migrates_older_version", evidence("run-2")).outcome == "unknown"
    refused_once = evidence("run-2", options=options,
                            incarnations=[{"inc": "run-2#1", "exit_code": 3, "signal": None}])
    assert run("migrates_older_version", refused_once).outcome == "fail"
    stuck = evidence("run-2", options=options)
    stuck.final = {**stuck.final, "version": 1}  # type: ignore[dict-item]
    verdict = run("migrates_older_version", stuck)
    assert verdict.outcome == "fail" and "version 1, expected 3" in verdict.reason


# ---- normalisation: run-specific names do not make two equal runs differ ---------------------------------

def test_equal_runs_with_other_ids_compare_equal() -> None:
    ev = evidence("run-77")
    assert ev.final["state"]["charge_id"] != BASE.final["state"]["charge_id"]  # type: ignore[index]
    for name in ("exactly_once", "same_final_state", "context_fidelity"):
        assert run(name, ev).outcome == "pass"


# ---- a checker that raises is unknown, not a crash ---------------------------------------------------------

def test_raising_checker_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(ev: Evidence, base: Evidence | None) -> Verdict:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(CHECKERS, "boom", boom)
    verdicts = run_checkers(["completes", "boom", "no_orphans"], evidence("run-2"), BASE)
    assert [v.outcome for v in verdicts] == ["pass", "unknown", "pass"]
    assert verdicts[1].checker == "boom" and "ZeroDivisionError" in verdicts[1].reason
    assert combine(verdicts) == "unknown"


def test_checker_raising_on_malformed_evidence_is_unknown() -> None:
    ev = evidence("run-2", audit=[{"cursor": "plan"}, {"cursor": "validate"}])  # no seq: no_rewind raises
    [verdict] = run_checkers(["no_rewind"], ev, BASE)
    assert verdict.outcome == "unknown" and "KeyError" in verdict.reason


# ---- combine ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("outcomes", [list(c) for n in range(4)
                                      for c in itertools.product(("pass", "fail", "unknown"), repeat=n)])
def test_combine_is_three_valued(outcomes: list[str]) -> None:
    verdicts = [{"pass": passed, "fail": lambda c: failed(c, "x"), "unknown": lambda c: unknown(c, "x")}[o](f"c{i}")
                for i, o in enumerate(outcomes)]
    expected = "fail" if "fail" in outcomes else "unknown" if "unknown" in outcomes or not outcomes else "pass"
    assert combine(verdicts) == expected


def test_a_crash_free_run_a_busy_machine_kept_from_finishing_is_unknown_not_fail() -> None:
    """The crash-free run's worker still running when its time budget ran out, having spent most of it
    waiting for a CPU (a DBOS worker's import on a loaded 2-core machine: 50 s of 60): `starved` says why,
    and the CLI says UNKNOWN, not "fails with no faults"; a worker that mostly slept is a FAIL."""
    from killpoint.run.trial import crash_free_failure

    for waited, starved in ((50.0, True), (1.0, False)):
        ev = evidence("baseline-1", limit="hung: baseline-1#1 (last point none) still running, not done within 60s")
        ev.events.insert(-1, event(type="hung", run_id=ev.run_id, inc=f"{ev.run_id}#1", pid=100, last_point=None,
                                   stack=["no stack"], age=60.0, waited=waited))
        failure = crash_free_failure("agent", ev)
        assert failure is not None and bool(failure.starved) == starved, (waited, failure)
        assert not starved or "waiting for a CPU" in failure.starved
