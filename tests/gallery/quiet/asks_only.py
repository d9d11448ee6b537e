"""Correct, and talks to the model only: ``draft`` asks it for a summary and ``polish`` asks it to shorten
that, each answer kept in the checkpoint, its cost in the checkpoint's `cost_usd`. No service request and no row of its own, so the
scenarios whose faults act on services (shared-account) do not apply; those acting on the model (flaky-
services' overloads and errors, sampling-model) do."""

from __future__ import annotations

from typing import Any

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

STATE_VERSION = 1
START = "draft"


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"topic": str(params.get("topic", "the quarterly close")), "draft": None, "short": None}


def draft(cp: Checkpoint, ctx: StepContext) -> StepResult:
    reply = ctx.model.ask([{"role": "user", "content": f"Summarise {cp.state['topic']} in three lines."}])
    return StepResult("polish", {"draft": reply.text}, cost_usd=reply.cost_usd)


def polish(cp: Checkpoint, ctx: StepContext) -> StepResult:
    reply = ctx.model.ask([{"role": "user", "content": f"Shorten to one line: {cp.state['draft']}"}])
    return StepResult("done", {"short": reply.text}, cost_usd=reply.cost_usd)


STEPS = {"draft": draft, "polish": polish}
