"""Looks like a model agent and is not one: it plans by a rule, keeps a `model_name` and a `models` table in
its state, passes `model=` to a function of its own, and imports the reference agent (whose steps ask the
model) without using its steps. Never calls the model."""

from __future__ import annotations

from killpoint.reference_agent import (
    Checkpoint,
    StepContext,
    StepResult,
    invoice_agent,  # noqa: F401 - imported, its steps unused
)
from tests.gallery.model_reach.common import START, STATE_VERSION, email
from tests.gallery.model_reach.common import initial_state as _initial

MODELS = {"rule": "no model at all"}


def _label(text: str, model: str) -> str:
    return f"{text} ({model})"


def initial_state(params: dict) -> dict:
    return {**_initial(params), "model_name": "rule", "models": dict(MODELS)}


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("email", {"plan": _label(f"email {cp.state['to']}", model=cp.state["model_name"])})


STEPS = {"plan": plan, "email": email}
__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
