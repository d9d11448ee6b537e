"""Corpus: a deduplicated re-read with no fault. The email step reads the charge's receipt back by sending
the charge again with the charge step's own key: the ledger replays the first answer, nothing is applied.
Correct: a request the service deduplicated and no fault caused is not rework of a replay."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.context import idempotency_key
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    receipt = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                key=idempotency_key(cp.run_id, "charge"))  # a read: the ledger replays it
    assert receipt.get("id") == s["charge_id"], "the ledger's replay names the charge the charge step made"
    return _STEPS["email"](cp, ctx)


STEPS = {**_STEPS, "email": email}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
