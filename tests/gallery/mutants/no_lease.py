"""Mutant: no lease. Nothing stops a second worker from working a run another worker is on: a worker
frozen and thawed carries on into the next step instead of finding its lease lost."""

from __future__ import annotations

from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from killpoint.reference_agent.lease import Lease

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _no_lease(self: Lease) -> None:
    return None  # BUG: no lease is taken or checked: two workers can work one run


Lease.acquire = _no_lease  # type: ignore[method-assign]
Lease.renew = _no_lease  # type: ignore[method-assign]
