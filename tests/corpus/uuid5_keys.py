"""Corpus: idempotency keys that are UUIDv5 of the run and the step: opaque to killpoint (no run id, no
step name in them), yet stable across replays. Correct: keys are compared by what they stand for."""

from __future__ import annotations

import dataclasses
import uuid

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # the URL namespace of RFC 4122


def keyed(step: str):  # noqa: ANN201 - a step function
    def run(cp: Checkpoint, ctx: StepContext) -> StepResult:
        key = str(uuid.uuid5(NAMESPACE, f"killpoint-corpus/{cp.run_id}/{step}"))
        return _STEPS[step](cp, dataclasses.replace(ctx, idempotency_key=key))
    return run


STEPS = {**_STEPS, "charge": keyed("charge"), "email": keyed("email")}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
