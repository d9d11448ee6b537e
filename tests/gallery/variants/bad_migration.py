"""The invoice agent at version 3 with a wrong v2 -> v3 migration (schema-upgrade): it nests the customer
but drops the approvals, so a run paused at v2 after `validate` resumes without the approval, goes back to
validate and asks the model again with a longer window: it ends elsewhere than a run done wholly at v3."""

from __future__ import annotations

from typing import Any

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _v2_to_v3(state: dict[str, Any]) -> dict[str, Any]:
    state = invoice_agent.MIGRATIONS[2](state)
    state["approvals"] = []  # BUG: "approvals are recomputed anyway"
    return state


MIGRATIONS = {**invoice_agent.MIGRATIONS, 2: _v2_to_v3}
