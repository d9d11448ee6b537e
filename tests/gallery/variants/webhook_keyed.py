"""The webhook agent with the window closed: `notify` goes through a downstream that honours idempotency
keys (the mailer, with the step's key), so no single fault can duplicate it and the negative control has
nothing to find."""

from __future__ import annotations

from killpoint.reference_agent import webhook_agent
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.webhook_agent import MIGRATIONS, START, STATE_VERSION, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def notify(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    ctx.mailer.send("hooks@example.com", "invoice.sent", {"invoice_id": s["invoice_id"], "email_id": s["email_id"]},
                    key=ctx.idempotency_key)
    return StepResult("record", {"notified": True})


STEPS = {**webhook_agent.STEPS, "notify": notify}
