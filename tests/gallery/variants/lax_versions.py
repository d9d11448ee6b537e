"""The invoice agent on a runtime without the version check (rollback-refusal): a checkpoint written by
newer code is read as if it were this code's, and the run goes on, calling the model and writing over the
newer checkpoint. An unreadable payload is still refused (the parse is untouched)."""

from __future__ import annotations

from collections.abc import Mapping

from killpoint.reference_agent import runtime
from killpoint.reference_agent.checkpoint import Checkpoint
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from killpoint.reference_agent.versioning import Migration
from tests.gallery.variants.patching import in_worker

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]
_upgrade = runtime.upgrade


def _lax(cp: Checkpoint, state_version: int, migrations: Mapping[int, Migration]) -> Checkpoint:
    if cp.version > state_version:
        return cp.replace(version=state_version)  # BUG: "it is probably compatible"
    return _upgrade(cp, state_version, migrations)


if in_worker():  # never patch the harness process that loads this module to check it
    runtime.upgrade = _lax
