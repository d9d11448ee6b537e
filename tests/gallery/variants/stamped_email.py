"""An agent whose run ends ``failed`` after a crash: the reference invoice agent, whose ``email`` step puts the
wall-clock time in the mail's data under the same idempotency key. A crash after the mailer applied the mail
makes the resumed step send the same key with another body; the mailer refuses it (422, as Stripe and the
IETF draft do), and the runtime checkpoints the run as ``failed`` with that error. killpoint must report the
run as failed, with its status and the mailer's answer, and not restart it until a liveness bound."""

from __future__ import annotations

import time

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
    reference,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    data = {"invoice_id": s["invoice_id"], "amount_cents": s["amount_cents"], "currency": s["currency"],
            "charge_id": s["charge_id"], "reference": reference(s), "sent_at": time.time()}
    template = "invoice" if s["verdict"] == "approve" else "invoice-under-review"
    receipt = ctx.mailer.send(s["customer"]["email"], template, data, key=ctx.idempotency_key)
    return StepResult("record", {"email_id": receipt.get("id")})


STEPS = {**_STEPS, "email": email}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
