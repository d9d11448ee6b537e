"""Mutant: a missing migration. Version 2 replaced v1's ``validated: bool`` with ``approvals``, but this
code's v1 -> v2 migration forgets to carry ``validated`` over: an approved v1 run reads as not validated
(the boolean defaults to False) and the agent re-does the approval it already had."""

from __future__ import annotations

from typing import Any

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "PREVIOUS_STEPS", "START", "STATE_VERSION", "STEPS", "initial_state"]

PREVIOUS_STEPS = "tests.gallery.mutants.invoice_agent_v1"
"""The code at STATE_VERSION 1 that a plain `killpoint run --steps` pauses a run under (schema-upgrade)."""


def _v1_to_v2(state: dict[str, Any]) -> dict[str, Any]:
    state.pop("validated", None)
    state["approvals"] = []  # BUG: v1's `validated` is not migrated; it defaults to False (no approval)
    return state


MIGRATIONS = {**invoice_agent.MIGRATIONS, 1: _v1_to_v2}
