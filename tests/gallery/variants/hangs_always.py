"""An agent that hangs in every run: the reference invoice agent, whose ``record`` step waits for an event
nobody sets. Its crash-free run never finishes: killpoint must say it hung, with the stack showing
``wait_for_ack``, and run no faulted trial against it."""

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


def wait_for_ack() -> None:
    threading.Event().wait()  # BUG: nobody ever sets it


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    wait_for_ack()
    return _STEPS["record"](cp, ctx)


STEPS = {**_STEPS, "record": record}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
