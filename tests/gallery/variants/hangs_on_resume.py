"""An agent that hangs when its ``record`` step is resumed: the reference invoice agent, whose ``record`` marks
its attempt in ``done_keys`` and, finding the mark of an earlier attempt, waits for that attempt's
acknowledgement, which a killed worker never gives. Crash-free it finishes; killed inside ``record``, the
resumed worker blocks for good. killpoint must report the run as hung, with the stack showing
``wait_for_earlier_attempt``, and never judge it as if it had finished."""

from __future__ import annotations

import threading

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS


def wait_for_earlier_attempt() -> None:
    threading.Event().wait()  # BUG: the earlier attempt's worker is dead; nobody will ever set this


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    mark = f"{ctx.idempotency_key}:attempt"
    if ctx.done_keys.was_done(mark):
        wait_for_earlier_attempt()
    ctx.done_keys.mark_done(mark)
    return _STEPS["record"](cp, ctx)


STEPS = {**_STEPS, "record": record}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
