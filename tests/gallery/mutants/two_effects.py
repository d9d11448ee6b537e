"""Mutant: two externally visible effects in one step. ``charge`` charges and then emails, so a crash after
the email replays both: a fault costs two repeated operations instead of one."""

from __future__ import annotations

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    charged = invoice_agent.charge(cp, ctx)
    if charged.cursor != "email":
        return charged
    cp = cp.replace(state={**cp.state, **charged.state})
    emailed = invoice_agent.email(cp, ctx)  # BUG: a second externally visible effect in the same step
    return StepResult(emailed.cursor, {**charged.state, **emailed.state})


STEPS = {name: step for name, step in invoice_agent.STEPS.items() if name != "email"} | {"charge": charge}
