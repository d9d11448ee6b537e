"""Correct, and makes no effect at all: ``measure`` and ``grade`` compute from the run's parameters and keep
their results only in the checkpoint. No service request, no row of its own: `exactly_once` and
`retries_keep_keys` have nothing to hold, so `n/a`, never a pass; the run is judged by the rest."""

from __future__ import annotations

from typing import Any

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

STATE_VERSION = 1
START = "measure"


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"values": list(params.get("values", [3, 1, 4, 1, 5])), "mean": None, "grade": None}


def measure(cp: Checkpoint, ctx: StepContext) -> StepResult:
    values = cp.state["values"]
    return StepResult("grade", {"mean": sum(values) / len(values)})


def grade(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("done", {"grade": "high" if cp.state["mean"] > 2 else "low"})


STEPS = {"measure": measure, "grade": grade}
