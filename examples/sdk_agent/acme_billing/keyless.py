"""Deliberately broken: Acme's billing agent charging with no idempotency key.

The stripe SDK then makes a random key for each call (and reuses it only on its own retries), so when the
worker dies after Stripe charged and before the checkpoint (``charge:effect.applied:kill``), the resumed
step charges a second time. killpoint's ``exactly_once`` checker finds the second charge. The fix is
``options={"idempotency_key": ctx.idempotency_key}`` (``acme_billing.steps``).
"""

from __future__ import annotations

from acme_billing import billing
from acme_billing.steps import START, STATE_VERSION, initial_state, receipt, review
from killpoint.reference_agent import Checkpoint, StepContext, StepResult


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    payment = billing.charge(cp.run_id, cp.state["invoice"], cp.state["verdict"], None)  # BUG: no key
    ctx.point("effect.responded")
    return StepResult("receipt", {"payment": payment})


STEPS = {"review": review, "charge": charge, "receipt": receipt}

__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
