"""Corpus: an agent that never calls the model. Plan and validation are rules in code; the cost is 0.
Correct: checkers of model requests and cost have nothing to judge (n/a), never a pass or a failure."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("validate", {"plan": "charge, email, record"})


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    ok = 0 < cp.state["amount_cents"] <= 1_000_000
    approvals = [a for a in cp.state["approvals"] if a != "validate"] + (["validate"] if ok else [])
    return StepResult("charge", {"validation": "APPROVE" if ok else "REJECT", "verdict": "approve",
                                 "approvals": approvals})


STEPS = {**_STEPS, "plan": plan, "validate": validate}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
