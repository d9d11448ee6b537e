"""Corpus: a step that legitimately does nothing on some runs. `remind` emails a payment reminder only for
invoices above a threshold; this invoice is below it, so the step changes nothing, sends nothing and asks
nothing, and its killpoints are all there is of it. Correct: nothing to repeat, nothing to miss."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

THRESHOLD_CENTS = 1_000_000


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = _STEPS["charge"](cp, ctx)
    return StepResult("remind", result.state) if result.cursor == "email" else result


def remind(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    if s["amount_cents"] > THRESHOLD_CENTS:
        ctx.mailer.send(s["customer"]["email"], "reminder", {"invoice_id": s["invoice_id"]}, key=ctx.idempotency_key)
    return StepResult("email")


STEPS = {**_STEPS, "charge": charge, "remind": remind}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
