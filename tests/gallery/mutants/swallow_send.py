"""Mutant (outage): the charge step wraps its send in ``except Exception`` and carries on. A 5xx is retried
by the client (four attempts), so one failed request never reaches the step; an outage longer than the
retries does, and the run goes on to email and record an invoice that was never charged."""

from __future__ import annotations

import logging

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

log = logging.getLogger(__name__)


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    if "validate" not in s["approvals"]:
        return StepResult("validate")
    try:
        receipt = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                    key=ctx.idempotency_key)
    except Exception:  # BUG: the error is swallowed and the run carries on as if charged
        log.exception("charge failed; carrying on")
        receipt = {}
    return StepResult("email", {"charge_id": receipt.get("id")})


STEPS = {**invoice_agent.STEPS, "charge": charge}
