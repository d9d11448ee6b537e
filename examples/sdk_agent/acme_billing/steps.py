"""Acme's billing agent as a killpoint step module (``killpoint run --steps acme_billing.steps``).

Flow (one externally visible effect per step)::

    review -> charge -> receipt -> done

- ``review`` asks OpenAI whether to approve the invoice (a model request; no effect);
- ``charge`` charges it with a Stripe PaymentIntent, keyed with the step's idempotency key: a step repeated
  after a crash sends the same key, and Stripe answers the first payment again instead of charging twice;
- ``receipt`` mails the receipt with Resend, keyed the same way.

The SDKs find the run's fakes in the environment at each step (``acme_billing.billing``): the
``StepContext`` carries killpoint's own clients, not the SDKs'. After each SDK call the step reports the
``effect.responded`` point (the answer is in hand, no checkpoint records it yet) as the runtime's own
clients do.
"""

from __future__ import annotations

from typing import Any

from acme_billing import billing
from killpoint.reference_agent import Checkpoint, StepContext, StepResult

START = "review"
STATE_VERSION = 1


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    """A new run's state (``billing.initial_state``)."""
    return billing.initial_state(params)


def review(cp: Checkpoint, ctx: StepContext) -> StepResult:
    verdict, usage = billing.review(cp.run_id, cp.state["invoice"])
    ctx.point("effect.responded")
    return StepResult("charge", {"verdict": verdict}, cost_usd=billing.cost_usd(usage))


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    payment = billing.charge(cp.run_id, cp.state["invoice"], cp.state["verdict"], ctx.idempotency_key)
    ctx.point("effect.responded")
    return StepResult("receipt", {"payment": payment})


def receipt(cp: Checkpoint, ctx: StepContext) -> StepResult:
    sent = billing.send_receipt(cp.run_id, cp.state["invoice"], cp.state["payment"], ctx.idempotency_key)
    ctx.point("effect.responded")
    return StepResult("done", {"receipt": sent})


STEPS = {"review": review, "charge": charge, "receipt": receipt}
