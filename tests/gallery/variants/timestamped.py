"""A correct agent with a harmless non-deterministic field: the reference invoice agent, whose `record` step
also stores the wall-clock time it ran (`state.recorded_at`), different in every run, crashed or not.
killpoint must find the field by itself (two crash-free runs differ in it) and leave it out."""

from __future__ import annotations

import time

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = _STEPS["record"](cp, ctx)
    return StepResult(result.cursor, {**result.state, "recorded_at": time.time()}, result.window, result.cost_usd,
                      result.in_txn)


STEPS = {**_STEPS, "record": record}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
