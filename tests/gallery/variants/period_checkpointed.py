"""A correct agent that looks like the billing-period bug: the charge's key carries the billing period, but
the period is read once, when the run is created (``initial_state``), and kept in the checkpoint. A resume in
another month charges under the run's own period: one charge, whatever the clock says."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {**invoice_agent.initial_state(params), "period": datetime.now(UTC).strftime("%Y-%m")}


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    if "validate" not in s["approvals"]:
        return StepResult("validate")
    receipt = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                key=f"{ctx.idempotency_key}:{s['period']}")  # the checkpointed period
    return StepResult("email", {"charge_id": receipt.get("id")})


STEPS = {**invoice_agent.STEPS, "charge": charge}
