"""Through the real stripe SDK: what the Stripe fake journals identifies an effect by its endpoint, so
exactly_once names a duplicate PaymentIntent as such and compares the refund with the refund, even with the
SDK's random idempotency keys (a framework's step that lets the SDK pick its keys, as a DBOS workflow does)."""

from __future__ import annotations

from typing import Any

import pytest

from killpoint.checkers.effects import exactly_once
from killpoint.checkers.evidence import Evidence
from killpoint.fake_services import Services

stripe = pytest.importorskip("stripe")

INTENT = {"amount": 1250, "currency": "usd", "payment_method": "pm_card_visa", "confirm": True}


def pay_then_refund(svc: Services, run: str, intents: int) -> None:
    """What the agent's run did: `intents` PaymentIntents (the step replayed, the SDK choosing a new key each
    time), then a refund of the last one."""
    c: Any = stripe.StripeClient("sk_test_killpoint", base_addresses={"api": svc.url("stripe", run)})
    made = [c.v1.payment_intents.create(params=INTENT) for _ in range(intents)]
    c.v1.refunds.create(params={"payment_intent": made[-1].id})


def test_the_duplicate_payment_intent_is_named_and_the_refund_is_its_knock_on(svc):
    pay_then_refund(svc, "base-run-1", intents=1)
    pay_then_refund(svc, "fault-run-2", intents=2)
    assert {e["endpoint"] for e in svc.effects("fault-run-2")} == {"POST /v1/payment_intents", "POST /v1/refunds"}
    base, run = (Evidence(r, effects=svc.effects(r)) for r in ("base-run-1", "fault-run-2"))
    v = exactly_once(run, base)
    assert v.outcome == "fail" and v.reason == "effects done twice", v
    assert v.evidence[0].startswith("extra x1: stripe POST /v1/payment_intents key="), v.evidence
    assert "-- a duplicate: the same payload as key=" in v.evidence[0], v.evidence
    assert v.evidence[1].startswith("  knock-on: payload differs: stripe POST /v1/refunds key="), v.evidence
    assert not any("missing" in line or "extra x1: stripe POST /v1/refunds" in line for line in v.evidence)


def test_the_same_calls_again_pass(svc):
    pay_then_refund(svc, "base-run-1", intents=1)
    pay_then_refund(svc, "again-run-2", intents=1)
    base, run = (Evidence(r, effects=svc.effects(r)) for r in ("base-run-1", "again-run-2"))
    assert exactly_once(run, base).outcome == "pass"
