"""Corpus: the whole tool loop in one step, as an agent framework's ``Runner.run`` wrapped in one durable
step runs it (examples/tool_agents/openai_agents_billing.py). The model calls ``issue_refund``, the tool
pays through the ledger keyed by the run and the ``tool_use`` id, the result goes back and the model
answers, all inside ``loop``: a resumed step asks again from the start, gets the same id (the fake's answer
is a function of the request) and sends the same key. Correct: one step, one effect, done once; its only
checkpoint before ``done`` is the first one, so schema-upgrade tests it by a kill after the effect alone."""

from __future__ import annotations

from typing import Any

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.pricing import cost_usd
from tests.tools.refund_agent import (
    MODEL,
    MODEL_SCRIPT,
    STATE_VERSION,
    TOOLS,
    ask,
    initial_state,
    issue_refund,
    tool_key,
)

START = "loop"
MAX_TURNS = 4


def loop(cp: Checkpoint, ctx: StepContext) -> StepResult:
    messages: list[dict[str, Any]] = list(cp.state["messages"])
    cost = 0.0
    for _ in range(MAX_TURNS):
        reply = ask(cp.run_id, messages)
        ctx.point("effect.responded")
        cost += cost_usd(MODEL, reply.usage)
        content = [block.model_dump(exclude_none=True) for block in reply.content]
        messages.append({"role": "assistant", "content": content})
        calls = [b for b in content if b["type"] == "tool_use"]
        if not calls:
            break
        results = []
        for call in calls:
            payout = issue_refund(cp.run_id, call["input"]["order_id"], call["input"]["amount"], tool_key(cp.run_id, call))
            results.append({"type": "tool_result", "tool_use_id": call["id"], "content": f"refunded as {payout}"})
        messages.append({"role": "user", "content": results})
    text = "".join(b.get("text", "") for b in messages[-1]["content"] if isinstance(b, dict))
    return StepResult("done", {"messages": messages, "answer": text}, cost_usd=cost)


STEPS = {"loop": loop}

__all__ = ["MODEL_SCRIPT", "START", "STATE_VERSION", "STEPS", "TOOLS", "initial_state"]
