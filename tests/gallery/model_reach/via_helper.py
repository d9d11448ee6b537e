"""Reaches the model in another module of its package (`advice.ask_plan`): may call the model."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.model_reach import advice
from tests.gallery.model_reach.common import START, STATE_VERSION, email, initial_state


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    text, cost = advice.ask_plan(ctx, cp.run_id)
    return StepResult("email", {"plan": text}, cost_usd=cost)


STEPS = {"plan": plan, "email": email}
__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
