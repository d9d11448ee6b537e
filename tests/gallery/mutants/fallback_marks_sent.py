"""Mutant (outage): when the mailer is still down after the client's retries, the email step falls back to
"queue it for later" and records the email as sent, but nothing ever sends it. The run ends done, and the
customer never gets the invoice."""

from __future__ import annotations

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.clients import ServiceUnavailable
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    try:
        return invoice_agent.email(cp, ctx)
    except ServiceUnavailable:  # BUG: gives up after the retries and records "sent" all the same
        return StepResult("record", {"email_id": "queued-for-later"})


STEPS = {**invoice_agent.STEPS, "email": email}
