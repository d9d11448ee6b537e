"""Mutant: a SIGTERM handler that exits at once without draining. The step in flight is abandoned and no
checkpoint says the run was paused; whatever it had done is left for a replay to repeat."""

from __future__ import annotations

import os
from types import FrameType

from killpoint.reference_agent import worker
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _exit_now(self: object, signum: int, frame: FrameType | None) -> None:
    os._exit(0)  # BUG: exits at once: no drain, no checkpoint of the step in flight


worker._Shutdown.handle = _exit_now  # type: ignore[method-assign,assignment]
