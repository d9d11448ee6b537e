"""Its steps are a table of callables built at import (a class's instances, a partial), one of which asks
the model: may call the model."""

from __future__ import annotations

import functools

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.model_reach.common import START, STATE_VERSION, email, initial_state


class Asking:
    def __init__(self, then: str) -> None:
        self.then = then

    def __call__(self, cp: Checkpoint, ctx: StepContext) -> StepResult:
        reply = ctx.model.ask([{"role": "user", "content": "Plan it."}])
        return StepResult(self.then, {"plan": reply.text}, cost_usd=reply.cost_usd)


def _send(cp: Checkpoint, ctx: StepContext, template: str) -> StepResult:
    return email(cp, ctx)


STEPS = {"plan": Asking("email"), "email": functools.partial(_send, template="plan")}
__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
