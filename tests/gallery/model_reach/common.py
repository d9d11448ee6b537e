"""What the step modules of this folder share: the initial state and the `email` step (no model call)."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

START = "plan"
STATE_VERSION = 1


def initial_state(params: dict) -> dict:
    return {"to": params.get("to", "ops@example.com"), "plan": None}


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    ctx.mailer.send(cp.state["to"], "plan", {"plan": cp.state["plan"]}, key=ctx.idempotency_key)
    return StepResult("done")
