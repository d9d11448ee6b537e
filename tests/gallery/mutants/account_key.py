"""Mutant: the charge is keyed on the customer's account (``<account>:charge``), not on the run. Within one
run the key is stable, so a retried charge is deduplicated as it should be; but a provider scopes keys per
API account, not per run, so next month's invoice for the same customer is replayed (never charged), and an
invoice for another amount is refused 422 ``idempotency_error``."""

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
    key = f"{cp.state['customer']['account']}:charge"  # BUG: one key per customer, for every invoice ever
    return invoice_agent.charge(cp, dataclasses.replace(ctx, idempotency_key=key))


STEPS = {**invoice_agent.STEPS, "charge": charge}
