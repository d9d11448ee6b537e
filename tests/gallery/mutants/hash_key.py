"""Mutant: the charge's idempotency key ends with Python's ``hash()`` of the invoice (so that a changed invoice
would get a new key). ``hash()`` of a string is salted per interpreter (``PYTHONHASHSEED``): after a real
restart the same charge carries another key, and the ledger applies it a second time. Every process forked
from one parent shares its salt, so only incarnations that differ like real restarts show it.
"""

from __future__ import annotations

import dataclasses

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    digest = hash((s["customer"]["account"], s["amount_cents"], s["currency"])) & 0xFFFFFFFF
    key = f"{ctx.idempotency_key}:{digest:08x}"  # BUG: hash() differs in every interpreter
    return invoice_agent.charge(cp, dataclasses.replace(ctx, idempotency_key=key))


STEPS = {**invoice_agent.STEPS, "charge": charge}
