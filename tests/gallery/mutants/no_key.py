"""Mutant: no idempotency key at all. The charge and the email go out without an ``Idempotency-Key``, so a
step replayed after a crash charges and emails a second time."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

Step = Callable[[Checkpoint, StepContext], StepResult]


def _keyless(step: Step) -> Step:
    def run(cp: Checkpoint, ctx: StepContext) -> StepResult:
        return step(cp, dataclasses.replace(ctx, idempotency_key=None))  # BUG: the effect carries no key

    return run


STEPS = {**invoice_agent.STEPS, "charge": _keyless(invoice_agent.charge), "email": _keyless(invoice_agent.email)}
