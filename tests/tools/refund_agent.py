"""A tool-calling agent as a step module (``killpoint run --steps tests.tools.refund_agent``): the real
anthropic SDK offers the model one tool, ``issue_refund``, and the agent runs the tool the model calls.

Flow (the tool loop, one step per turn)::

    decide -> refund -> answer -> done

- ``decide`` sends the customer's message with the tool; the model (the fake, driven by ``MODEL_SCRIPT``)
  calls ``issue_refund`` with amount 4200 for order A-17;
- ``refund`` runs the tool: a payout through the fake ledger (``POST {LEDGER_URL}/v1/charges``), keyed with
  the run id and the ``tool_use`` id. The fake's answer is a pure function of the request, so a step
  replayed after a crash gets the same ``tool_use`` id, sends the same key, and the ledger answers the
  first payout again;
- ``answer`` sends the tool result back; the model says ``done``.

The SDK and the tool find the run's fakes in ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` and
``LEDGER_URL`` (a queue worker's ``{run_id}`` slot filled in). ``tests.tools.refund_agent_bare`` is the
same agent whose tool sends no key.
"""

from __future__ import annotations

import os
from typing import Any

import anthropic
import httpx

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.context import for_run
from killpoint.reference_agent.pricing import cost_usd

MODEL = "claude-haiku-4-5"
START = "decide"
STATE_VERSION = 1
REFUND_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
                 "required": ["order_id", "amount"]}
TOOLS = [{"name": "issue_refund", "description": "Refund an order, in cents.", "input_schema": REFUND_SCHEMA}]
MODEL_SCRIPT = [
    {"when": {"tool": "issue_refund"},
     "then": [{"call": "issue_refund", "arguments": {"order_id": "A-17", "amount": 4200}}, {"say": "done"}]},
]


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Order A-17 arrived broken. Please refund it."}],
            "calls": [], "answer": None}


def ask(run_id: str, messages: list[dict[str, Any]]) -> Any:
    client = anthropic.Anthropic(base_url=for_run(os.environ["ANTHROPIC_BASE_URL"], run_id),
                                 api_key=os.environ["ANTHROPIC_API_KEY"], max_retries=2)
    return client.messages.create(model=MODEL, max_tokens=256, messages=messages, tools=TOOLS)


def issue_refund(run_id: str, order_id: str, amount: int, key: str | None) -> str:
    """The tool: a payout through the ledger; the payout's id."""
    headers = {"Idempotency-Key": key} if key is not None else {}
    response = httpx.post(for_run(os.environ["LEDGER_URL"], run_id) + "/v1/charges", headers=headers,
                          json={"account": order_id, "amount_cents": amount, "currency": "usd"}, timeout=30)
    response.raise_for_status()
    return str(response.json()["id"])


def decide(cp: Checkpoint, ctx: StepContext) -> StepResult:
    reply = ask(cp.run_id, cp.state["messages"])
    ctx.point("effect.responded")
    content = [block.model_dump(exclude_none=True) for block in reply.content]
    calls = [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in content if b["type"] == "tool_use"]
    messages = [*cp.state["messages"], {"role": "assistant", "content": content}]
    return StepResult("refund" if calls else "done", {"messages": messages, "calls": calls},
                      cost_usd=cost_usd(MODEL, reply.usage))


def tool_key(run_id: str, call: dict[str, Any]) -> str:
    """The idempotency key of one tool call's effect: the run and the model's ``tool_use`` id."""
    return f"{run_id}:{call['id']}"


def run_tools(cp: Checkpoint, ctx: StepContext, keyed: bool) -> StepResult:
    """Run each tool call of the last turn (with its key, or none) and hand the results to ``answer``."""
    results = []
    for call in cp.state["calls"]:
        key = tool_key(cp.run_id, call) if keyed else None
        payout = issue_refund(cp.run_id, call["input"]["order_id"], call["input"]["amount"], key)
        ctx.point("effect.responded")
        results.append({"type": "tool_result", "tool_use_id": call["id"], "content": f"refunded as {payout}"})
    return StepResult("answer", {"messages": [*cp.state["messages"], {"role": "user", "content": results}]})


def refund(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return run_tools(cp, ctx, keyed=True)


def answer(cp: Checkpoint, ctx: StepContext) -> StepResult:
    reply = ask(cp.run_id, cp.state["messages"])
    ctx.point("effect.responded")
    text = "".join(block.text for block in reply.content if block.type == "text")
    return StepResult("done", {"answer": text}, cost_usd=cost_usd(MODEL, reply.usage))


STEPS = {"decide": decide, "refund": refund, "answer": answer}
