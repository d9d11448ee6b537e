"""Deliberately broken: ``openai_agents_billing`` whose ``charge_card`` tool sends no idempotency key.

Killed after Stripe charged the card and before the step's checkpoint (``bill:effect.applied:kill``), the
resumed step runs the agent again, the model calls ``charge_card`` again, and the card is charged twice;
``exactly_once`` finds the second PaymentIntent.
"""

from __future__ import annotations

from openai_agents_billing import MODEL_SCRIPT, START, STATE_VERSION, initial_state, run_bill

from killpoint.reference_agent import Checkpoint, StepContext, StepResult


def bill(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return run_bill(cp, ctx, keyed=False)  # BUG: the charge carries no idempotency key


STEPS = {"bill": bill}

__all__ = ["MODEL_SCRIPT", "START", "STATE_VERSION", "STEPS", "initial_state"]
