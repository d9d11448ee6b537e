"""Mutant: no version check. A checkpoint written by newer code (a rollback) is resumed as if it were this
code's own version: the fields the newer code renamed are silently missing, and the run goes on by luck."""

from __future__ import annotations

from collections.abc import Mapping

from killpoint.reference_agent import runtime, versioning
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _upgrade(cp: runtime.Checkpoint, state_version: int,
             migrations: Mapping[int, versioning.Migration]) -> runtime.Checkpoint:
    if cp.version > state_version:
        return cp.replace(version=state_version)  # BUG: no version check: a newer checkpoint is taken as ours
    return versioning.upgrade(cp, state_version, migrations)


runtime.upgrade = _upgrade
