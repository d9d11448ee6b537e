"""The `no_key` mutant (its charge and email replayed without a key) whose `plan` takes 1 s: every trial
of it lasts that much longer, so that a run of several scenarios side by side is still in the middle of
each when a test interrupts it (tests/hostile/test_interruptions.py: the fast `no_key` let crash-points
finish before zombie-worker had judged its first trial on a loaded machine, and so did 0.25 s once, in a
clean-clone CI run of 0fae731, crash-points then lasting ~20 s idle against zombie-worker's waits of fixed
length: at 1 s crash-points lasts ~60 s idle, zombie-worker's first verdict comes at ~5.5 s and the first
failure at ~15.5 s)."""

from __future__ import annotations

import time

from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult
from tests.gallery.mutants.no_key import MIGRATIONS, START, STATE_VERSION, initial_state
from tests.gallery.mutants.no_key import STEPS as _STEPS

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

PLAN_SECONDS = 1.0


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    time.sleep(PLAN_SECONDS)  # the agent's own slowness (a long model call), not a wait for anything
    return _STEPS["plan"](cp, ctx)


STEPS = {**_STEPS, "plan": plan}
