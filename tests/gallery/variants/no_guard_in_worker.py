"""The invoice agent on a checkpoint store without the monotonic guard (zombie-worker): the upsert
overwrites whatever is stored, so a worker thawed after another has moved the run on writes its older
checkpoint over the newer one instead of being fenced.

The same bug as the mutant ``tests.gallery.mutants.no_guard``, but patched only inside a worker
incarnation (``patching.in_worker``): the zombie-worker test loads it through a scenario's `steps` in the
test process itself, which the mutant (patching at import) would leave without the guard."""

from __future__ import annotations

from killpoint.reference_agent import store
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from tests.gallery.variants.patching import in_worker

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

if in_worker():  # never patch the harness process that loads this module to check it
    store.UPSERT = store.UPSERT.replace("WHERE checkpoints.seq < EXCLUDED.seq", "")  # BUG: last writer wins
