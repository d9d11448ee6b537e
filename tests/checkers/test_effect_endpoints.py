"""An effect's identity includes its endpoint: exactly_once compares effects of the same (service, endpoint)
only, names the endpoint in its lines, and judges a history that recorded no endpoint as before.

The evidence is built as the harness records it: typed `attempt`/`effect` records after a `run.evidence`
event in a history, read back by `from_history`."""

from __future__ import annotations

from typing import Any

from killpoint.checkers.effects import exactly_once
from killpoint.checkers.evidence import Evidence
from killpoint.events import Attempt, Effect, RunEvidence
from killpoint.run.evidence import from_history
from killpoint.run.history import History

INTENT = {"amount": "1250", "currency": "usd"}


def evidence(run_id: str, effects: list[dict[str, Any]]) -> Evidence:
    """The evidence of `run_id` whose services applied `effects` (each also its applying attempt)."""
    history = History()
    head = history.add(RunEvidence(run_id=run_id, options={}))
    for n, e in enumerate(effects, 1):
        record = {"order": n, "service": "stripe", "run_id": run_id, "payload_digest": f"d{n}", **e}
        history.add(Attempt(run_id=run_id, of=head.i, record={**record, "outcome": "applied"}))
        history.add(Effect(run_id=run_id, of=head.i, record=record))
    return from_history(history.of_run(run_id), run_id)


def intent(id_: str, key: str) -> dict[str, Any]:
    return {"endpoint": "POST /v1/payment_intents", "id": id_, "key": key, "payload": INTENT}


def refund(id_: str, key: str, of: str) -> dict[str, Any]:
    return {"endpoint": "POST /v1/refunds", "id": id_, "key": key, "payload": {"payment_intent": of}}


def test_a_duplicate_payment_intent_is_named_and_the_refund_compared_with_the_refund() -> None:
    """Random SDK keys (DBOS): the replayed step made a second PaymentIntent, whose key took the number the
    refund had in the crash-free run. It is never diffed against the refund."""
    base = evidence("run-1", [intent("pi_base_0000001", "key-aaaaaaaa"),
                              refund("re_base_0000001", "key-bbbbbbbb", "pi_base_0000001")])
    run = evidence("run-2", [intent("pi_runx_0000001", "key-cccccccc"), intent("pi_runx_0000002", "key-dddddddd"),
                             refund("re_runx_0000001", "key-eeeeeeee", "pi_runx_0000002")])
    v = exactly_once(run, base)
    assert v.outcome == "fail" and v.reason == "effects done twice", v
    assert v.evidence == (
        'extra x1: stripe POST /v1/payment_intents key=key-dddddddd {"amount": "1250", "currency": "usd"} '
        "-- a duplicate: the same payload as key=key-cccccccc, sent again under another key",
        "  knock-on: payload differs: stripe POST /v1/refunds key=key-eeeeeeee (1 field(s)):",
        '      - payment_intent: "pi_base_0000001" (<stripe-effect1>)',
        '      + payment_intent: "pi_runx_0000002" (<stripe-effect2>)',
    ), "\n".join(v.evidence)


def test_a_duplicate_under_the_same_key_names_its_endpoint() -> None:
    base = evidence("run-1", [refund("re_base_0000001", "refund-key", "pi_seeded")])
    run = evidence("run-2", [refund("re_runx_0000001", "refund-key", "pi_seeded"),
                             refund("re_runx_0000002", "refund-key", "pi_seeded")])
    v = exactly_once(run, base)
    assert v.reason == "effects done twice"
    assert v.evidence == ('extra x1: stripe POST /v1/refunds key=refund-key {"payment_intent": "pi_seeded"} '
                          "-- a duplicate: applied x2, crash-free x1",), v.evidence


def test_actions_that_name_their_object_only_in_the_path_are_told_apart() -> None:
    """Two confirms with one empty body are not the same effect: the path names the PaymentIntent."""
    def confirm(id_: str, of: str) -> dict[str, Any]:
        return {"endpoint": f"POST /v1/payment_intents/{of}/confirm", "id": id_, "key": None, "payload": {}}

    base = evidence("run-1", [intent("pi_base_0000001", "pay-key-1"), confirm("confirm_base_01", "pi_base_0000001")])
    same = evidence("run-2", [intent("pi_runx_0000001", "pay-key-1"), confirm("confirm_runx_01", "pi_runx_0000001")])
    assert exactly_once(same, base).outcome == "pass"  # the id in the path is this run's own: a placeholder
    other = evidence("run-3", [intent("pi_runy_0000001", "pay-key-1"), confirm("confirm_runy_01", "pi_seeded_other")])
    v = exactly_once(other, base)
    assert v.outcome == "fail"
    assert v.evidence == ("extra x1: stripe POST /v1/payment_intents/pi_seeded_other/confirm key=None {}",
                          "missing x1: stripe POST /v1/payment_intents/pi_base_0000001/confirm key=None {}"), v.evidence


def test_a_history_without_endpoints_is_judged_as_before() -> None:
    """No endpoint recorded: one endpoint per service, the lines as they always were."""
    def bare(e: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in e.items() if k != "endpoint"}

    base = evidence("run-1", [bare(intent("pi_base_0000001", "key-aaaaaaaa")),
                              bare(refund("re_base_0000001", "key-bbbbbbbb", "pi_base_0000001"))])
    run = evidence("run-2", [bare(intent("pi_runx_0000001", "key-cccccccc")),
                             bare(intent("pi_runx_0000002", "key-dddddddd")),
                             bare(refund("re_runx_0000001", "key-eeeeeeee", "pi_runx_0000002"))])
    v = exactly_once(run, base)
    assert v.outcome == "fail"  # as before: paired by key order, the PaymentIntent diffed against the refund
    assert v.reason == "effects done that the crash-free run never did; effects done with a different payload", v
    assert v.evidence[:2] == ('extra x1: stripe key=key-eeeeeeee {"payment_intent": "pi_runx_0000002"}',
                              "payload differs: stripe key=key-dddddddd (3 field(s)):"), v.evidence
    assert exactly_once(evidence("run-3", [bare(intent("pi_runz_0000001", "key-ffffffff"))]),
                        evidence("run-1", [bare(intent("pi_base_0000001", "key-aaaaaaaa"))])).outcome == "pass"
