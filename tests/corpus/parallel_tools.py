"""Corpus: parallel tool calls. The model (the fake, scripted) answers with two `issue_refund` calls in one
turn; the agent runs them at the same time, from two threads, each keyed by the run and its `tool_use` id,
then sends both results back. Correct: concurrent requests in one step, each effect done once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.tools.refund_agent import STATE_VERSION, TOOLS, answer, decide, issue_refund, tool_key

START = "decide"
MODEL_SCRIPT = [
    {"when": {"tool": "issue_refund"},
     "then": [{"calls": [{"call": "issue_refund", "arguments": {"order_id": "A-17", "amount": 4200}},
                         {"call": "issue_refund", "arguments": {"order_id": "A-18", "amount": 1300}}]},
              {"say": "done"}]},
]


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Orders A-17 and A-18 arrived broken. Refund both."}],
            "calls": [], "answer": None}


def refund(cp: Checkpoint, ctx: StepContext) -> StepResult:
    def run(call: dict[str, Any]) -> dict[str, Any]:
        payout = issue_refund(cp.run_id, call["input"]["order_id"], call["input"]["amount"],
                              tool_key(cp.run_id, call))
        return {"type": "tool_result", "tool_use_id": call["id"], "content": f"refunded as {payout}"}

    with ThreadPoolExecutor(max_workers=len(cp.state["calls"]) or 1) as pool:
        results = list(pool.map(run, cp.state["calls"]))
    ctx.point("effect.responded")
    return StepResult("answer", {"messages": [*cp.state["messages"], {"role": "user", "content": results}]})


STEPS = {"decide": decide, "refund": refund, "answer": answer}

__all__ = ["MODEL_SCRIPT", "START", "STATE_VERSION", "STEPS", "TOOLS", "initial_state"]
