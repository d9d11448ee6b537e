"""Deliberately broken: ``anthropic_tool_loop`` whose ``issue_refund`` tool sends no idempotency key.

Killed after the ledger paid and before ``act``'s checkpoint (``act:effect.applied:kill``), the resumed step
runs the same tool_use block again, and the customer is refunded twice; ``exactly_once`` finds the second
refund.
"""

from __future__ import annotations

from anthropic_tool_loop import MODEL_SCRIPT, START, STATE_VERSION, initial_state, run_tools, think

from killpoint.reference_agent import Checkpoint, StepContext, StepResult


def act(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return run_tools(cp, ctx, keyed=False)  # BUG: the refund carries no idempotency key


STEPS = {"think": think, "act": act}

__all__ = ["MODEL_SCRIPT", "START", "STATE_VERSION", "STEPS", "initial_state"]
