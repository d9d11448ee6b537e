"""The invoice agent with its idempotency keys dropped: the charge and the email go out without an
`Idempotency-Key`, so a step replayed after a kill between the effect and its checkpoint repeats it."""

from __future__ import annotations

from dataclasses import replace

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return invoice_agent.charge(cp, replace(ctx, idempotency_key=None))  # BUG: no key


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return invoice_agent.email(cp, replace(ctx, idempotency_key=None))  # BUG: no key


STEPS = {**invoice_agent.STEPS, "charge": charge, "email": email}
