"""Not a mutant: the reference invoice agent as it was at ``STATE_VERSION`` 1, the previous code the
``missing_migration`` mutant is resumed after (``--previous-steps tests.gallery.mutants.invoice_agent_v1``).

At v1 the customer was flat (``customer_email``, ``account``) and the approval was a boolean,
``validated``; v2 replaced it with ``approvals: list[str]`` and v3 nested the customer. Each step reads the
v1 shape through a view in the current shape, runs the current step's logic, and writes v1 state back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from killpoint.reference_agent import invoice_agent as current
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

START = current.START
STATE_VERSION = 1
MIGRATIONS: dict = {}

Step = Callable[[Checkpoint, StepContext], StepResult]


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    """A new run's v1 state: the customer flat, ``validated`` instead of ``approvals``."""
    state = current.initial_state(params)
    customer = state.pop("customer")
    state.pop("approvals")
    return {**state, "customer_email": customer["email"], "account": customer["account"], "validated": False}


def _as_current(state: dict[str, Any]) -> dict[str, Any]:
    view = {k: v for k, v in state.items() if k not in ("customer_email", "account", "validated")}
    return {**view, "customer": {"email": state["customer_email"], "account": state["account"]},
            "approvals": ["validate"] if state["validated"] else []}


def _v1(step: Step) -> Step:
    def run(cp: Checkpoint, ctx: StepContext) -> StepResult:
        result = step(cp.replace(state=_as_current(cp.state)), ctx)
        patch = dict(result.state)
        if "approvals" in patch:
            patch["validated"] = "validate" in patch.pop("approvals")
        return StepResult(result.cursor, patch, result.window, result.cost_usd, result.in_txn)

    run.__name__ = run.__qualname__ = step.__name__
    return run


STEPS = {name: _v1(step) for name, step in current.STEPS.items()}
