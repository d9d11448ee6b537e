"""Mutant: a drain deadline longer than the grace period. The worker waits up to 90 s for the step in flight
(the articles' example deadline) while the platform SIGKILLs it after its grace period: the handler is
decorative, the kill always comes first."""

from __future__ import annotations

from killpoint.reference_agent import worker
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from killpoint.reference_agent.runtime import Drain

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

_init = worker._Shutdown.__init__


def _long_deadline(self: worker._Shutdown, drain: Drain, deadline_seconds: float) -> None:
    _init(self, drain, 90.0)  # BUG: a 90 s drain deadline, whatever the grace period before SIGKILL


worker._Shutdown.__init__ = _long_deadline  # type: ignore[method-assign]
