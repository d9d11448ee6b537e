"""Corpus: checkpoints more often than once per effect. After each step that acts, a bookkeeping step
(`note_*`) only saves a note in the state: the run checkpoints twice as often as it acts, and some steps
have no effect and no model call at all. Correct: a step with nothing to repeat repeats nothing."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

FLOW = ("plan", "validate", "charge", "email", "record")


def then_note(step: str):  # noqa: ANN201 - a step function
    def run(cp: Checkpoint, ctx: StepContext) -> StepResult:
        result = _STEPS[step](cp, ctx)
        if result.cursor == "done" or result.cursor not in FLOW:
            return result
        return StepResult(f"note_{step}", {**result.state, "next": result.cursor}, result.window,
                          result.cost_usd, result.in_txn)
    return run


def note(step: str):  # noqa: ANN201 - a step function
    def run(cp: Checkpoint, ctx: StepContext) -> StepResult:
        return StepResult(cp.state["next"], {"notes": [*cp.state.get("notes", []), step]})
    return run


STEPS = {**{s: then_note(s) for s in FLOW}, **{f"note_{s}": note(s) for s in FLOW[:-1]}}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
