"""The vocabulary of faults: kill points (in step order) and actions, and which action fits which point.

Two actions take an argument, written into the action itself (so a schedule token stays `STEP:POINT:ACTION`):

- `clock+AMOUNT` / `clock-AMOUNT` (AMOUNT a whole number with a unit `s`, `m`, `h` or `d`: `clock+366d`,
  `clock-1h`): SIGKILL the worker here, as `kill` does, and move the wall clock of every later incarnation of
  the run by AMOUNT (the run's shifts add up): the crash and its resume are that far apart in the worker's
  time (Jepsen's clock bump, Temporal's time skipping). `clock+366d` always crosses a day, a month and a year
  boundary; `clock-1h` always crosses an hour boundary backwards, whatever the real date.
- `outage` / `outage=N`: from this request on, every request of this run to the same service fails (5xx
  before anything is applied): until the run's next incarnation starts (`outage`), or for N requests in a
  row, this one included (`outage=N`). A client's retries (four attempts in the reference client) all meet
  the same outage, so the error reaches the step.
"""

from __future__ import annotations

import re

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
"""The actions written as they are named."""
ACTION_NAMES: tuple[str, ...] = (*ACTIONS, "clock", "outage")
"""Every action by name: `clock` is written with its argument (`clock+366d`), `outage` with or without
(`outage`, `outage=5`); `--actions` takes these names."""

PROCESS_ACTIONS = frozenset({"kill", "term", "stop", "db-crash", "clock"})
"""Actions that work at any point: they act on the worker process or the database, not on a request."""

ARRIVAL_POINTS = frozenset({"effect.received", "model.request"})
"""The points where a request has arrived and nothing is applied yet."""

ACTION_POINTS: dict[str, frozenset[str]] = {
    **{a: frozenset(POINTS) for a in PROCESS_ACTIONS},
    "drop": frozenset({"effect.applied"}),
    "error": frozenset({"effect.received", "effect.applied", "model.request"}),
    "slow": frozenset({"effect.received", "model.request"}),
    "overload": frozenset({"effect.applied", "model.request"}),
    "outage": ARRIVAL_POINTS,
}
"""For each action, the points where it means something (a drop needs an applied effect, and so on).
`error` and `overload` at `effect.applied` are the ambiguous failure: the service applied the request,
then answered 5xx (or its overload answer, 429/529), so the client cannot tell it was done."""

_CLOCK = re.compile(r"clock(?P<sign>[+-])(?P<n>[0-9]+)(?P<unit>[smhd])")
_OUTAGE = re.compile(r"outage(?:=(?P<n>[0-9]+))?")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
CLOCK_FORM = "clock+N or clock-N with a unit s, m, h or d (clock+366d, clock-1h)"
OUTAGE_FORM = "outage (until the run's next incarnation) or outage=N (N requests in a row, N >= 1)"


def base(action: str) -> str:
    """The action's name without its argument: `clock+366d` -> `clock`, `outage=6` -> `outage`."""
    for name in ("clock", "outage"):
        if action.startswith(name):
            return name
    return action


def problem(action: str) -> str | None:
    """What is wrong with `action` as written (an unknown name, a bad argument), or None."""
    name = base(action)
    if name not in ACTION_NAMES:
        return f"unknown action {action!r}"
    if name == "clock" and not _CLOCK.fullmatch(action):
        return f"bad clock action {action!r}: write {CLOCK_FORM}"
    if name == "outage":
        m = _OUTAGE.fullmatch(action)
        if not m or (m["n"] is not None and int(m["n"]) < 1):
            return f"bad outage action {action!r}: write {OUTAGE_FORM}"
    return None


def clock_shift(action: str) -> float:
    """The seconds a `clock±N<unit>` action moves the clock by (0.0 for any other action)."""
    m = _CLOCK.fullmatch(action)
    if not m:
        return 0.0
    return (1 if m["sign"] == "+" else -1) * int(m["n"]) * UNIT_SECONDS[m["unit"]]


def outage_length(action: str) -> int | None:
    """N of `outage=N`; None for `outage` (until the next incarnation) and for any other action."""
    m = _OUTAGE.fullmatch(action)
    return int(m["n"]) if m and m["n"] is not None else None


def is_process(action: str) -> bool:
    """True when `action` acts on the worker process or the database (a `clock` jump kills the worker)."""
    return base(action) in PROCESS_ACTIONS


def fits(action: str, point: str) -> bool:
    """True when `action` can be applied at `point`."""
    return point in ACTION_POINTS.get(base(action), frozenset())
