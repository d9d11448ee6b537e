"""Mutant (time): the charge's idempotency key carries the billing period, read from the clock when the step
runs. Killed after the charge and before its checkpoint, and resumed in another month (the last day of a
month at 23:59:59, resumed after midnight; here a clock jump of a year and a day), the charge is sent again
under the new period's key, and the ledger charges twice."""

from __future__ import annotations

from datetime import UTC, datetime

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


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    if "validate" not in s["approvals"]:
        return StepResult("validate")
    period = datetime.now(UTC).strftime("%Y-%m")  # BUG: read again on every attempt, not checkpointed
    receipt = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                key=f"{ctx.idempotency_key}:{period}")
    return StepResult("email", {"charge_id": receipt.get("id")})


STEPS = {**invoice_agent.STEPS, "charge": charge}
