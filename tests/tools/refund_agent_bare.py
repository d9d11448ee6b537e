"""Deliberately broken: ``tests.tools.refund_agent`` whose tool sends no idempotency key.

When the worker dies after the ledger paid and before the checkpoint (``refund:effect.applied:kill``),
the resumed step runs the tool again and the customer is refunded twice; ``exactly_once`` finds the second
payout.
"""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.tools.refund_agent import (
    MODEL_SCRIPT,
    START,
    STATE_VERSION,
    answer,
    decide,
    initial_state,
    run_tools,
)


def refund(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return run_tools(cp, ctx, keyed=False)  # BUG: the tool's payout carries no idempotency key


STEPS = {"decide": decide, "refund": refund, "answer": answer}

__all__ = ["MODEL_SCRIPT", "START", "STATE_VERSION", "STEPS", "initial_state"]
