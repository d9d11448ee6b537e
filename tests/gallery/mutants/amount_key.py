"""Mutant: the charge is keyed on what is charged (``<account>:<amount>:<currency>``), "so that a retried
charge is the same request". Two invoices of one customer for the same amount are one charge to the
provider, whose keys outlive the run: the second month's identical invoice is replayed, never charged."""

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


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    key = f"{s['customer']['account']}:{s['amount_cents']}:{s['currency']}"  # BUG: the same for two equal invoices
    return invoice_agent.charge(cp, dataclasses.replace(ctx, idempotency_key=key))


STEPS = {**invoice_agent.STEPS, "charge": charge}
