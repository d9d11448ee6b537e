"""The vocabulary of faults: kill points (in step order) and actions, and which action fits which point."""

from __future__ import annotations

POINTS: tuple[str, ...] = (
    "step.start",
    "model.request",
    "effect.received",
    "effect.applied",
    "effect.responded",
    "checkpoint.writing",
    "checkpoint.committed",
)
"""Named boundaries inside one step, in the order a step reaches them (docs/contracts.md, section 1)."""

ACTIONS: tuple[str, ...] = ("kill", "term", "stop", "db-crash", "drop", "error", "slow", "overload")

PROCESS_ACTIONS = frozenset({"kill", "term", "stop", "db-crash"})
"""Actions that work at any point: they act on the worker process or the database, not on a request."""

ACTION_POINTS: dict[str, frozenset[str]] = {
    **{a: frozenset(POINTS) for a in PROCESS_ACTIONS},
    "drop": frozenset({"effect.applied"}),
    "error": frozenset({"effect.received", "effect.applied", "model.request"}),
    "slow": frozenset({"effect.received", "model.request"}),
    "overload": frozenset({"effect.applied", "model.request"}),
}
"""For each action, the points where it means something (a drop needs an applied effect, and so on).
`error` and `overload` at `effect.applied` are the ambiguous failure: the service applied the request,
then answered 5xx (or its overload answer, 429/529), so the client cannot tell it was done."""


def fits(action: str, point: str) -> bool:
    """True when `action` can be applied at `point`."""
    return point in ACTION_POINTS.get(action, frozenset())
