"""Mutant (outage): when the model still fails after the SDK's retries, the validation step approves by
default instead of letting the run be resumed. During a model outage the invoice is approved without a
validation, the run records the fallback and emails an invoice the model never checked."""

from __future__ import annotations

import anthropic

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    try:
        return invoice_agent.validate(cp, ctx)
    except anthropic.APIError:  # BUG: a model outage becomes an approval
        approvals = [a for a in cp.state["approvals"] if a != "validate"] + ["validate"]
        return StepResult("charge", {"validation": "APPROVE (model unavailable: approved by default)",
                                     "verdict": "approve", "approvals": approvals})


STEPS = {**invoice_agent.STEPS, "validate": validate}
