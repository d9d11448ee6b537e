"""The false verdicts of the issue, on hand-made evidence: each a correct agent's record that a checker used
to fail (the whole agents are tests/corpus/, run by test_corpus.py)."""

from __future__ import annotations

from killpoint.checkers.context import context_fidelity
from killpoint.checkers.evidence import Evidence, volatile_fields
from killpoint.checkers.faults import retries_keep_keys
from killpoint.checkers.outcome import cost_accounted
from killpoint.checkers.process import bounded_rework
from killpoint.events import FaultFired, Point

USAGE = {"input_tokens": 64, "output_tokens": 9}


def ask(order: int, text: str) -> dict:
    return {"order": order, "model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": text}],
            "request_digest": f"d-{text}", "outcome": "applied", "usage": USAGE}


def test_a_prompt_with_the_time_in_it_is_the_same_request_on_replay() -> None:
    base = Evidence("baseline-1", final={"cursor": "done", "status": "done", "cost_usd": 0.000327},
                    model_requests=[ask(1, "It is 2026-12-01T17:20:56.123456+00:00. Plan.")])
    replayed = [ask(1, "It is 2026-12-01T17:20:57.000001+00:00. Plan."),
                ask(2, "It is 2026-12-01T17:21:03.424242+00:00. Plan.")]  # the zombie and its successor
    ev = Evidence("crash-points-1", final={"cursor": "done", "status": "done", "cost_usd": 0.000327}, model_requests=replayed)
    assert context_fidelity(ev, base).outcome == "pass"
    assert cost_accounted(ev, base).outcome == "pass", cost_accounted(ev, base)
    other = Evidence("crash-points-1", final={"cursor": "done", "status": "done"}, model_requests=[ask(1, "Plan it twice.")])
    assert context_fidelity(other, base).outcome == "fail"  # what is not a timestamp still counts


def test_volatile_parts_of_model_requests_are_found_from_two_crash_free_runs_or_declared() -> None:
    a = Evidence("baseline-0", model_requests=[ask(1, "nonce 8c1f: plan")])
    b = Evidence("baseline-1", model_requests=[ask(1, "nonce 77aa: plan")])
    found = frozenset(volatile_fields(a, b))
    assert found == {"model.messages.0.content"}, found
    base = Evidence("baseline-1", model_requests=b.model_requests, volatile=found)
    ev = Evidence("crash-points-1", model_requests=[ask(1, "nonce 0042: plan")])
    verdict = context_fidelity(ev, base)
    assert verdict.outcome == "pass" and "model.messages.0.content" in verdict.reason, verdict
    assert context_fidelity(ev, Evidence("baseline-1", model_requests=b.model_requests)).outcome == "fail"


def test_a_deduplicated_re_read_with_no_fault_is_not_rework() -> None:
    def run(run_id: str, *extra: object) -> Evidence:
        events = [Point(run_id=run_id, inc="i1", step="charge", point="step.start", seq=3),
                  Point(run_id=run_id, inc="i1", step="charge", point="effect.received", source="ledger"),
                  Point(run_id=run_id, inc="i1", step="email", point="step.start", seq=4),
                  Point(run_id=run_id, inc="i1", step="email", point="effect.received", source="ledger"),
                  Point(run_id=run_id, inc="i1", step="email", point="effect.received", source="mailer"), *extra]
        attempts = [{"order": 1, "service": "ledger", "key": f"{run_id}:charge", "outcome": "applied"},
                    {"order": 2, "service": "ledger", "key": f"{run_id}:charge", "outcome": "deduplicated"},
                    {"order": 3, "service": "mailer", "key": f"{run_id}:email", "outcome": "applied"}]
        return Evidence(run_id, events=events, attempts=attempts)

    base = run("baseline-1")
    assert bounded_rework(run("crash-points-1"), base).outcome == "pass", bounded_rework(run("crash-points-1"), base)
    assert bounded_rework(run("crash-points-1"), None).outcome == "fail"  # without the crash-free run, a repeat is a repeat


def test_a_loop_is_judged_per_visit() -> None:
    def start(seq: int, inc: str = "i1") -> Point:
        return Point(run_id="crash-points-1", inc=inc, step="charge", point="step.start", seq=seq)

    loop = Evidence("crash-points-1", events=[start(3), start(4)])
    assert bounded_rework(loop, None).outcome == "pass", bounded_rework(loop, None)
    kill = FaultFired(run_id="crash-points-1", inc="i1", step="charge", point="checkpoint.writing", action="kill")
    replayed = Evidence("crash-points-1", events=[start(3), kill, start(3, "i2"), start(4, "i2")])
    assert bounded_rework(replayed, None).outcome == "pass"
    twice = Evidence("crash-points-1", events=[start(3), start(4), start(4)])  # visit 2 started again with no fault
    verdict = bounded_rework(twice, None)
    assert verdict.outcome == "fail" and "charge (visit 2): started 2x" in verdict.evidence[0], verdict


def test_a_correct_key_never_applied_in_the_faulted_run_is_the_crash_free_key() -> None:
    key = "5f0d6c1e-8f3a-4c55-9b0e-2d2a7f1e9c41"
    base = Evidence("baseline-1", attempts=[{"service": "stripe", "key": "k-1b2c3d4e", "outcome": "applied"}],
                    effects=[{"service": "stripe", "key": "k-1b2c3d4e", "id": "pi_000001"}])
    ev = Evidence("crash-points-1", attempts=[{"service": "stripe", "key": key, "outcome": "injected-error"}])
    assert retries_keep_keys(ev, base).outcome == "pass", retries_keep_keys(ev, base)
    two = Evidence("crash-points-1", attempts=[{"service": "stripe", "key": key, "outcome": "injected-error"},
                                  {"service": "stripe", "key": "k-another1", "outcome": "applied"}])
    assert retries_keep_keys(two, base).outcome == "fail"  # a retry under a second key is still caught
