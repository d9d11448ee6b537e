"""The reference invoice agent as it was at ``STATE_VERSION`` 2: the previous code of ``invoice_agent``.

Same flow, same model requests, same effects with the same keys; only the state's shape differs. At v2 the
customer is flat (``customer_email``, ``account``); v3 nested it as ``customer: {email, account}`` and
migrates a v2 state with its ``MIGRATIONS[2]``. The schema-upgrade scenario pauses a run under this module
and resumes it under ``invoice_agent``.

Each step reads the v2 shape through :func:`_as_current`, a read-only view with the customer nested, and runs
the current step's logic on it: the steps' patches never touch the customer, so what a step writes back is
v2 state. The view is this module's own, not v3's ``MIGRATIONS[2]``: a broken migration cannot hide here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import invoice_agent as current
from .runtime import Checkpoint, StepContext, StepResult

START = current.START
STATE_VERSION = 2
MIGRATIONS = {1: current.MIGRATIONS[1]}

Step = Callable[[Checkpoint, StepContext], StepResult]


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    """A new run's v2 state: as v3's, with the customer flat."""
    state = current.initial_state(params)
    customer = state.pop("customer")
    return {**state, "customer_email": customer["email"], "account": customer["account"]}


def _as_current(state: dict[str, Any]) -> dict[str, Any]:
    """The v2 state as the step logic reads it (the customer nested); the stored state is not changed."""
    view = {k: v for k, v in state.items() if k not in ("customer_email", "account")}
    return {**view, "customer": {"email": state["customer_email"], "account": state["account"]}}


def _v2(step: Step) -> Step:
    def run(cp: Checkpoint, ctx: StepContext) -> StepResult:
        result = step(cp.replace(state=_as_current(cp.state)), ctx)
        if "customer" in result.state:
            raise ValueError(f"step {ctx.cursor!r} patched the customer, which v2 keeps flat")
        return result

    run.__name__ = run.__qualname__ = step.__name__
    run.__doc__ = step.__doc__
    return run


STEPS = {name: _v2(step) for name, step in current.STEPS.items()}
OWN_EFFECTS_SQL = current.OWN_EFFECTS_SQL
