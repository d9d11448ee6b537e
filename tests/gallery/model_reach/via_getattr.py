"""Takes the model client by its name as a string (`getattr(ctx, "model")`): may call the model."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.model_reach.common import START, STATE_VERSION, email, initial_state

CLIENT = "model"


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    reply = getattr(ctx, CLIENT).ask([{"role": "user", "content": "Plan it."}])
    return StepResult("email", {"plan": reply.text}, cost_usd=reply.cost_usd)


STEPS = {"plan": plan, "email": email}
__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
