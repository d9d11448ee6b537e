"""Mutant: the checkpoint upsert without the monotonic guard. A zombie worker, thawed after a successor
moved the run on, overwrites the newer checkpoint with its older one: the run goes back."""

from __future__ import annotations

from killpoint.reference_agent import store
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

_GUARD = "WHERE checkpoints.seq < EXCLUDED.seq"
assert _GUARD in store.UPSERT, "the reference upsert changed; update this mutant"
store.UPSERT = store.UPSERT.replace(_GUARD, "")  # BUG: no monotonic guard: any write wins, even an older one
