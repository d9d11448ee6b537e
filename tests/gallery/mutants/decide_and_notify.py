"""Mutant: the validation and the email that announces it are one step. ``validate`` asks the model and
mails the customer "invoice" or "invoice under review" at once, with the step's key. Resumed after the
mail, it asks again; a model that samples answers the other verdict, and the second mail (the other
template, the same key) is refused 422: the customer was told one thing and the run records another."""

from __future__ import annotations

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
    verdict,
)
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = invoice_agent.validate(cp, ctx)
    s = {**cp.state, **result.state}
    template = "invoice-approved" if verdict(s["validation"]) == "approve" else "invoice-under-review"
    # BUG: the decision is announced before it is checkpointed
    ctx.mailer.send(s["customer"]["email"], template, {"invoice_id": s["invoice_id"]},
                    key=f"{ctx.idempotency_key}:notice")
    return result


STEPS = {**invoice_agent.STEPS, "validate": validate}
