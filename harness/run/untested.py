"""Why a scenario had nothing to test: said, never passed.

A scenario's schedules are made of the fault points its agent's crash-free run reached inside a step
(`trial.step_points`). When none of the scenario's points is there (a LangGraph graph run with
`durability="exit"` commits its only checkpoint after every node ran; a worker whose requests no step can
be told for), the scenario runs no trial: its outcome is unknown, and its reason is `nothing_to_test`:
what the crash-free run reached, and the adapter's hint on how the agent makes its steps testable
(`Adapter.no_checkpoint_hint`).

`late_checkpoint` finds the other way a framework can hide its steps: a step that sent a request before
the checkpoint that starts it was committed (LangGraph's default `durability="async"` writes a superstep's
checkpoint while the next node runs). Such a request is read against the previous step's checkpoint, so
it is attributed to the previous step unless its key or a `Killpoint-Step` header names its own; the
scenario says so once, with the adapter's hint (`Adapter.late_checkpoint_hint`).
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


def late_checkpoint(base: Evidence, adapter: Adapter) -> str:
    """The note for the first step whose request reached a service before the commit of the checkpoint that
    starts it (the first audit write whose cursor is that step), or "" when every step's checkpoint came
    first (or the adapter has no hint)."""
    hint_of = getattr(adapter, "late_checkpoint_hint", None)
    events = base.events
    for i, e in enumerate(events):
        if not (isinstance(e, Point) and e.point in ("effect.received", "model.request") and e.step):
            continue
        opener = next((w.get("seq") for w in base.audit if w.get("cursor") == e.step), None)
        if opener is None:
            continue
        if any(isinstance(x, Point) and x.point == "checkpoint.committed" and x.seq == opener for x in events[i + 1:]):
            hint = hint_of(e.step) if hint_of is not None else ""
            return f"note: {e.step} sent a request before its checkpoint was committed; {hint}" if hint else ""
    return ""
