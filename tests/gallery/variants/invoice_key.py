"""A correct agent that looks like ``mutants.account_key``: the charge is keyed on the customer's account
*and the invoice* (``<account>:<invoice_id>:charge``). The key outlives the run, as the provider's do, and
that is right: the same invoice is charged once however often it is retried, and the next invoice of the
same customer gets a key of its own. killpoint must pass it in shared-account."""

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
    key = f"{s['customer']['account']}:{s['invoice_id']}:charge"  # one invoice, one charge, in any run
    return invoice_agent.charge(cp, dataclasses.replace(ctx, idempotency_key=key))


STEPS = {**invoice_agent.STEPS, "charge": charge}
