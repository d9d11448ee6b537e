"""Mutant: the approval decision and the charge it gates are one step. ``validate`` asks the model to
validate the invoice, charges when it approves, and checkpoints the verdict with the charge. Killed after
the charge, the step is resumed and asks again; a model that samples may now say "review": the customer is
charged, yet the run records "review" and emails "under review"."""

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



def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    window = [*cp.window, {"role": "user", "content": f"Validate {_describe(s)} against the plan. "
                                                      "Answer APPROVE or REJECT, with a reason."}]
    reply = ctx.model.ask(window)
    decided = verdict(reply.text)
    charge_id = None
    if decided == "approve":  # BUG: the effect is made on a decision not yet checkpointed
        receipt = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                    key=ctx.idempotency_key)
        charge_id = receipt.get("id")
    return StepResult("email", {"validation": reply.text, "verdict": decided, "approvals": ["validate"],
                                "charge_id": charge_id}, [*window, reply.message], reply.cost_usd)


STEPS = {"plan": invoice_agent.plan, "validate": validate, "email": invoice_agent.email,
         "record": invoice_agent.record}
