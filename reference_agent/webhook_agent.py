"""The webhook variant of the invoice agent, kept for the harness's negative-control scenario.

Flow::

    plan -> validate -> charge -> email -> notify -> record -> done

``notify`` posts to a webhook that has no idempotency support, guarded by our own ``was_done`` /
``mark_done`` (the ``done_keys`` table). That narrows the window of a duplicate without closing it: a worker
killed after the post and before ``mark_done`` (e.g. at ``notify:effect.responded``) posts again on resume.
The harness expects its exactly-once checker to catch that.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import invoice_agent
from .invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, charge, plan, record, validate
from .runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {**invoice_agent.initial_state(params), "notified": False}


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return dataclasses.replace(invoice_agent.email(cp, ctx), cursor="notify")


def notify(cp: Checkpoint, ctx: StepContext) -> StepResult:
    key = ctx.idempotency_key
    if ctx.done_keys.was_done(key):
        return StepResult("record", {"notified": True})
    s = cp.state
    ctx.webhook.post("invoice.sent", {"invoice_id": s["invoice_id"], "email_id": s["email_id"],
                                      "key": key})
    ctx.done_keys.mark_done(key)
    return StepResult("record", {"notified": True})


STEPS = {"plan": plan, "validate": validate, "charge": charge, "email": email, "notify": notify,
         "record": record}
