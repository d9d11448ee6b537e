"""Mutant (time): the email is deduplicated within an hour: its idempotency key carries the hour it is sent
in (``time.time() // 3600``). A resume in another hour (a clock an hour behind, or a day ahead) sends the
email again under another key: the customer gets it twice."""

from __future__ import annotations

import time

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
            "charge_id": s["charge_id"], "reference": reference(s)}
    template = "invoice" if s["verdict"] == "approve" else "invoice-under-review"
    window = int(time.time() // 3600)  # BUG: the dedupe window is the hour the attempt runs in
    receipt = ctx.mailer.send(s["customer"]["email"], template, data, key=f"{ctx.idempotency_key}:h{window}")
    return StepResult("record", {"email_id": receipt.get("id")})


STEPS = {**invoice_agent.STEPS, "email": email}
