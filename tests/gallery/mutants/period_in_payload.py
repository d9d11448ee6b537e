"""Mutant (time): the email's key is right, but its body names the billing period, read from the clock when
the step runs ("your invoice for December 2026"). Resumed in another period, the retry sends other
parameters under the same key: the mailer refuses it (422, as real APIs answer a reused key with another
body) and the run fails, though the first email went out."""

from __future__ import annotations

from datetime import date

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
    reference,
)
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    data = {"invoice_id": s["invoice_id"], "amount_cents": s["amount_cents"], "currency": s["currency"],
            "charge_id": s["charge_id"], "reference": reference(s),
            "period": date.today().strftime("%B %Y")}  # BUG: a decision read again on every attempt
    template = "invoice" if s["verdict"] == "approve" else "invoice-under-review"
    receipt = ctx.mailer.send(s["customer"]["email"], template, data, key=ctx.idempotency_key)
    return StepResult("record", {"email_id": receipt.get("id")})


STEPS = {**invoice_agent.STEPS, "email": email}
