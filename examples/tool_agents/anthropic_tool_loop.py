"""A refund agent on the Anthropic SDK's own tool loop, crash-tested as a killpoint step module: Claude is
offered the tool ``issue_refund``; each ``tool_use`` block it returns is run against the ledger, its
``tool_result`` sent back, until the model answers in text.

    PYTHONPATH=examples/tool_agents killpoint run --steps anthropic_tool_loop

Flow: two durable steps that loop, one checkpoint per turn of the conversation:

1. ``think``: ``client.messages.create(tools=TOOLS, messages=...)``; the assistant's message is appended to
   the checkpointed conversation. ``stop_reason == "tool_use"`` goes on to ``act``; else the text is the
   answer and the run is ``done``.
2. ``act``: each ``tool_use`` block of the last assistant message is run, its effect keyed with the run and
   the block's id (``RUN_ID:<tool_use_id>``: the same on a replay, since the checkpointed message holds the
   id); the ``tool_result`` blocks are appended as the user's message; back to ``think``.

A worker killed in ``act`` after the ledger paid runs ``act`` again from the same checkpoint: the same ids,
the same keys, so the ledger answers the repeat with the first refund. ``anthropic_tool_loop_keyless`` is
the same agent whose refund carries no key: the customer is refunded twice, and ``exactly_once`` says so.

Environment (killpoint sets it): ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY (the model), the ledger through the
runtime's client (``ctx.ledger``).
"""

from __future__ import annotations

import os
from typing import Any

import anthropic

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.context import for_run
from killpoint.reference_agent.pricing import cost_usd

MODEL = "claude-sonnet-4-6"
START = "think"
STATE_VERSION = 1
QUESTION = "Order A-17 arrived broken. Refund the customer's 42.00 USD to account A-17."
TOOLS = [{"name": "issue_refund", "description": "Refund an order's customer, in cents. Returns the refund's id.",
          "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"},
                                                            "amount_cents": {"type": "integer"}},
                           "required": ["order_id", "amount_cents"]}}]
MODEL_SCRIPT = [  # what the fake model answers (docs/tools.md): refund 42.00 for A-17, then say so
    {"when": {"tool": "issue_refund"},
     "then": [{"call": "issue_refund", "arguments": {"order_id": "A-17", "amount_cents": 4200}},
              {"say": "Refunded 42.00 USD for order A-17."}]},
]
MAX_TURNS = 4


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": QUESTION}], "turns": 0, "answer": None}


def client(run_id: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=for_run(os.environ["ANTHROPIC_BASE_URL"], run_id),
                               api_key=os.environ["ANTHROPIC_API_KEY"], max_retries=3)


def think(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    reply = client(cp.run_id).messages.create(model=MODEL, max_tokens=512, tools=TOOLS, messages=s["messages"])
    ctx.point("effect.responded")
    content = [block.model_dump(exclude_none=True) for block in reply.content]
    messages = [*s["messages"], {"role": "assistant", "content": content}]
    cost = cost_usd(MODEL, reply.usage)
    if reply.stop_reason == "tool_use" and s["turns"] < MAX_TURNS:
        return StepResult("act", {"messages": messages, "turns": s["turns"] + 1}, cost_usd=cost)
    answer = " ".join(b["text"] for b in content if b.get("type") == "text")
    return StepResult("done", {"messages": messages, "answer": answer}, cost_usd=cost)


def run_tools(cp: Checkpoint, ctx: StepContext, keyed: bool) -> StepResult:
    """Each tool_use block of the last assistant message, run once; their results as the user's message."""
    results = []
    for block in cp.state["messages"][-1]["content"]:
        if block.get("type") != "tool_use":
            continue
        args = block["input"]
        key = f"{cp.run_id}:{block['id']}" if keyed else None
        receipt = ctx.ledger.charge(str(args["order_id"]), int(args["amount_cents"]), "usd", key=key)  # type: ignore[arg-type]
        results.append({"type": "tool_result", "tool_use_id": block["id"], "content": f"refunded as {receipt['id']}"})
    return StepResult("think", {"messages": [*cp.state["messages"], {"role": "user", "content": results}]})


def act(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return run_tools(cp, ctx, keyed=True)


STEPS = {"think": think, "act": act}
