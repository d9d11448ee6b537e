"""A broken agent whose state differs only after a crash: its `record` step stores the incarnation that ran
it. Two crash-free runs agree (the first incarnation of each run); a run resumed after a kill does not.
Non-determinism detection must not hide this: `same_final_state` fails after a crash."""

from __future__ import annotations

import os

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
    worker = os.environ.get("KILLPOINT_INCARNATION", "")
    return StepResult(result.cursor, {**result.state, "recorded_by": worker}, result.window, result.cost_usd,
                      result.in_txn)


STEPS = {**_STEPS, "record": record}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
