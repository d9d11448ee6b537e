"""A correct agent that looks like the swallowed-send bug: the charge step wraps its send in ``except
Exception``, but logs and re-raises once the client's retries are spent, so the run stops where it is and is
resumed later under the same key: charged once, after the outage."""

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
    try:
        return invoice_agent.charge(cp, ctx)
    except Exception:
        log.exception("charge failed after the client's retries; the run will be resumed")
        raise


STEPS = {**invoice_agent.STEPS, "charge": charge}
