"""Deliberately broken: Acme's refund agent with a new idempotency key for every attempt of ``refund``.

A uuid4 per call looks like a key, and the ledger's own retries inside one call do reuse it; but when the
worker dies after the ledger booked the refund and before the checkpoint (``refund:effect.applied:kill``),
the resumed step makes a new key, and the ledger books the refund a second time. killpoint's
``exactly_once`` checker catches it. The fix is ``key=ctx.idempotency_key`` (see ``acme_refunds.steps``).
"""

from __future__ import annotations

import uuid

from acme_refunds.steps import (
    NONDETERMINISTIC,
    OWN_EFFECTS_SQL,
    SCHEMA_SQL,
    START,
    STATE_VERSION,
    credit_account,
    initial_state,
)
from acme_refunds.steps import STEPS as _STEPS
from killpoint.reference_agent import Checkpoint, StepContext, StepResult


def refund(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    key = f"refund-{uuid.uuid4()}"  # BUG: a new key per attempt; a replay of this step is a new refund
    entry = ctx.ledger.charge(credit_account(s), s["amount_cents"], s["currency"], key=key)
    return StepResult("notify", {"ledger_entry": entry.get("id")})


STEPS = {**_STEPS, "refund": refund}

__all__ = ["NONDETERMINISTIC", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
