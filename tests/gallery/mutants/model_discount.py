"""Mutant: the charge step asks the model whether the invoice earns a loyalty discount and charges the
amount it decided, in one step. Resumed after the charge, the step asks again; a model that samples
answers otherwise, and the charge for the other amount (the same key) is refused 422: the run cannot
finish, and the amount charged is not the one it would record."""

from __future__ import annotations

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    _describe,
    initial_state,
    verdict,
)
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    window = [{"role": "user", "content": f"Does {_describe(s)} earn the 10% loyalty discount? "
                                          "Answer APPROVE or REVIEW."}]
    reply = ctx.model.ask(window)
    amount = s["amount_cents"] * 9 // 10 if verdict(reply.text) == "approve" else s["amount_cents"]
    # BUG: the amount the model decided is charged before the decision is checkpointed
    receipt = ctx.ledger.charge(s["customer"]["account"], amount, s["currency"], key=ctx.idempotency_key)
    return StepResult("email", {"charge_id": receipt.get("id"), "charged_cents": amount}, [], reply.cost_usd)


STEPS = {**invoice_agent.STEPS, "charge": charge}
