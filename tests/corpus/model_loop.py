"""Corpus: a step visited several times that asks the model each time. `review` runs three passes, each
asking for one more opinion on the invoice (the pass number in the prompt), keeping every answer; only
then does the run go on to charge. Correct: each pass is a visit of its own, each answer kept once."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    _describe,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS
from killpoint.reference_agent.invoice_agent import initial_state as _initial

PASSES = 3


def initial_state(params: dict) -> dict:
    return {**_initial(params), "opinions": []}


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = _STEPS["validate"](cp, ctx)
    return StepResult("review", result.state, result.window, result.cost_usd) if result.cursor == "charge" else result


def review(cp: Checkpoint, ctx: StepContext) -> StepResult:
    n = len(cp.state["opinions"]) + 1
    window = [*cp.window, {"role": "user", "content": f"Opinion {n} of {PASSES} on {_describe(cp.state)}: "
                                                      "anything to change before charging?"}]
    reply = ctx.model.ask(window)
    opinions = [*cp.state["opinions"], reply.text]
    return StepResult("review" if n < PASSES else "charge", {"opinions": opinions}, [*window, reply.message],
                      reply.cost_usd)


STEPS = {**_STEPS, "validate": validate, "review": review}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
