"""A correct agent that lets a 5xx end the worker: the reference invoice agent, whose ledger client does not
retry (one attempt), so a 5xx from the ledger ends the worker with an error and the next incarnation resumes
the charge under the same key. The step is re-done because of the service fault, not for nothing: killpoint
must count that fault as a fault on the step (``bounded_rework``) and pass it."""

from __future__ import annotations

import dataclasses

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.clients import Ledger, RetryPolicy
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
    once = Ledger(ctx.ledger.http, ctx.ledger.base_url, ctx.ledger.responded, RetryPolicy(attempts=1))
    return invoice_agent.charge(cp, dataclasses.replace(ctx, ledger=once))


STEPS = {**invoice_agent.STEPS, "charge": charge}
