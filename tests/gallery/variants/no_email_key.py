"""A broken agent: the reference invoice agent, except that its email carries no idempotency key.

A kill after the mailer applied the email (``email:effect.applied:kill``) makes the resumed step send the
invoice a second time, which ``exactly_once`` must catch.
"""

from __future__ import annotations

from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state, reference
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    data = {"invoice_id": s["invoice_id"], "amount_cents": s["amount_cents"], "currency": s["currency"],
            "charge_id": s["charge_id"], "reference": reference(s)}
    receipt = ctx.mailer.send(s["customer"]["email"], "invoice", data, key=None)  # type: ignore[arg-type]
    return StepResult("record", {"email_id": receipt.get("id")})


STEPS = {**_STEPS, "email": email}

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]
