"""Why a scenario had nothing to test: said, never passed.

A scenario's schedules are made of the fault points its agent's crash-free run reached inside a step
(`trial.step_points`). When none of the scenario's points is there (a LangGraph graph run with
`durability="exit"` commits its only checkpoint after every node ran; a worker whose requests no step can
be told for), the scenario runs no trial: its outcome is unknown, and its reason is `nothing_to_test`:
what the crash-free run reached, and the adapter's hint on how the agent makes its steps testable
(`Adapter.no_checkpoint_hint`).
"""

from __future__ import annotations

from killpoint.adapters import Adapter
from killpoint.checkers.evidence import Evidence
from killpoint.events import Point

CHECKPOINT_POINTS = ("checkpoint.writing", "checkpoint.committed")


def nothing_to_test(base: Evidence, adapter: Adapter, points: tuple[str, ...] = ()) -> str:
    """One line: the crash-free run reached none of `points` (any point, when empty) inside a step, what it
    did reach, and, when it has no checkpoint point inside a step, the adapter's hint."""
    reached = [e for e in base.events if isinstance(e, Point)]
    commits = sum(1 for e in reached if e.point == "checkpoint.committed")
    in_steps = sorted({e.point for e in reached if e.step})
    wanted = f"none of {', '.join(points)}" if points else "no point of this scenario's faults"
    seen = (f"{commits} checkpoint commit(s), none inside a step" if commits and not
            set(CHECKPOINT_POINTS) & set(in_steps) else f"points inside a step: {', '.join(in_steps) or 'none'}")
    line = f"nothing to test: the crash-free run reached {wanted} inside a step ({seen})"
    if not set(CHECKPOINT_POINTS) & set(in_steps):
        line += f"; {adapter.no_checkpoint_hint(commits)}"
    return line
