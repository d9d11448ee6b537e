"""The invoice agent on a checkpoint store without the monotonic guard (zombie-worker): the upsert
overwrites whatever is stored, so a worker thawed after another has moved the run on writes its older
checkpoint over the newer one instead of being fenced."""

from __future__ import annotations

from broken.patching import in_worker
from killpoint.reference_agent import store
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

if in_worker():  # never patch the harness process that loads this module to check it
    store.UPSERT = store.UPSERT.replace("WHERE checkpoints.seq < EXCLUDED.seq", "")  # BUG: last writer wins
