"""A correct agent with opaque stable keys: the reference invoice agent, whose effects are keyed by a UUID
derived from the run and the step (the same on every replay, but not ``<run_id>:<step>``). killpoint must
name the step of each request from what it saw of the worker (its last ``step.start``), not from the key,
and pass it."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

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

Step = Callable[[Checkpoint, StepContext], StepResult]


def _opaque(step: Step) -> Step:
    def run(cp: Checkpoint, ctx: StepContext) -> StepResult:
        key = str(uuid.uuid5(uuid.NAMESPACE_URL, ctx.idempotency_key))  # stable across replays, names no step
        return step(cp, dataclasses.replace(ctx, idempotency_key=key))

    return run


STEPS = {**invoice_agent.STEPS, "charge": _opaque(invoice_agent.charge), "email": _opaque(invoice_agent.email)}
