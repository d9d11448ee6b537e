"""Deliberately broken: Acme's refund agent whose ``notify`` reads a field the state never has.

It fails on every run, crashed or not (``KeyError: 'phone'``). killpoint runs the agent once without
faults before any faulted trial; here that run fails, so it reports the agent's own traceback first and
runs no faulted trial: no fault's effect could be told apart from this bug.
"""

from __future__ import annotations

from acme_refunds.steps import (
    NONDETERMINISTIC,
    OWN_EFFECTS_SQL,
    SCHEMA_SQL,
    START,
    STATE_VERSION,
    email_data,
    initial_state,
)
from acme_refunds.steps import STEPS as _STEPS
from killpoint.reference_agent import Checkpoint, StepContext, StepResult


def notify(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    data = {**email_data(s), "sms_to": s["customer"]["phone"]}  # BUG: initial_state never sets a phone
    receipt = ctx.mailer.send(s["customer"]["email"], "refund-issued", data, key=ctx.idempotency_key)
    return StepResult("record", {"email_id": receipt.get("id")})


STEPS = {**_STEPS, "notify": notify}

__all__ = ["NONDETERMINISTIC", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
