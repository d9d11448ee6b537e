"""Mutant: the invoice email is keyed on its recipient (``<email>:invoice``). Stable within a run, so a
retried send is deduplicated; but the mailer's keys are per provider account, so next month's invoice to
the same customer reuses the key with another body and is refused 422: the run cannot finish."""

from __future__ import annotations

import dataclasses

from killpoint.reference_agent import invoice_agent
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
    key = f"{cp.state['customer']['email']}:invoice"  # BUG: one key per recipient, for every invoice ever
    return invoice_agent.email(cp, dataclasses.replace(ctx, idempotency_key=key))


STEPS = {**invoice_agent.STEPS, "email": email}
