"""Corpus: streaming model calls. Plan and validation read the model's answer as server-sent events
(`messages.stream`), the cost from the final message's usage. Correct: a streamed answer is one answer."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    _describe,
    initial_state,
    verdict,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS
from killpoint.reference_agent.pricing import cost_usd


def ask(ctx: StepContext, window: list[dict]) -> tuple[str, float]:
    model = ctx.model
    with model.sdk.messages.stream(model=model.model, max_tokens=model.max_tokens, messages=window) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    return text, cost_usd(model.model, final.usage)


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    window = [{"role": "user", "content": f"Plan the billing of {_describe(cp.state)}. Answer with a short plan."}]
    text, cost = ask(ctx, window)
    return StepResult("validate", {"plan": text}, [*window, {"role": "assistant", "content": text}], cost)


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    window = [*cp.window, {"role": "user", "content": f"Validate {_describe(cp.state)}. Answer APPROVE or REJECT."}]
    text, cost = ask(ctx, window)
    approvals = [a for a in cp.state["approvals"] if a != "validate"] + ["validate"]
    return StepResult("charge", {"validation": text, "verdict": verdict(text), "approvals": approvals},
                      [*window, {"role": "assistant", "content": text}], cost)


STEPS = {**_STEPS, "plan": plan, "validate": validate}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
