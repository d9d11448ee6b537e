"""Correct, and has one step: ``tally`` counts the run's parameters into its checkpoint and is done. No
service, no model, no table of its own. After its one checkpoint a run is done, so a worker killed there
leaves nothing to resume: stalled-sweep kills it as the step starts instead."""

from __future__ import annotations

from typing import Any

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

STATE_VERSION = 1
START = "tally"


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"items": list(params.get("items", ["a", "b", "c"])), "count": None}


def tally(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("done", {"count": len(cp.state["items"])})


STEPS = {"tally": tally}
