"""Asks the model through a name it builds at run time (`"".join(...)`; `"mo" + "del"` the compiler folds
into "model"), which no reading of its code can see: `may_call_model` says no, and the worker builds the
SDK's client at the first call instead. The run must still finish as any other."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.model_reach.common import START, STATE_VERSION, email, initial_state


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    reply = getattr(ctx, "".join(("mo", "del"))).ask([{"role": "user", "content": "Plan it."}])
    return StepResult("email", {"plan": reply.text}, cost_usd=reply.cost_usd)


STEPS = {"plan": plan, "email": email}
__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
