"""The fault plan: which fault, if any, fires when a run reaches a point. Pure: no I/O, no clock.

One plan serves both ways of driving runs:

1. `scope="run"` (a single run, or every run of a fleet on its own): each run counts its own arrivals
   at (step, point); the fault `STEP:POINT:ACTION@N` fires at that run's N-th arrival.
2. `scope="fleet"`: one count across every run of a fleet; `@N` is the N-th arrival of any run.
3. `reach(run_id, step, point)` counts one arrival and returns its occurrence number and the fault that
   fires there (each (step, point, N) fires at most once, since each arrival is counted once).
4. `unfired()` names the faults no arrival matched (nothing was injected for them).
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from killpoint.faults.points import fits
from killpoint.faults.schedule import Fault, Schedule, derive_seed

Scope = Literal["run", "fleet"]

FLEET_ACTIONS = ("kill", "term")
"""The actions a seeded fleet schedule draws from by default."""


class FaultPlan:
    """Counts arrivals at kill points and says which fault fires at each (see the module docstring)."""

    def __init__(self, schedule: Schedule, scope: Scope = "run") -> None:
        self.schedule = schedule
        self.scope = scope
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._faults = {(f.step, f.point, f.nth): f for f in schedule}
        self._fired: dict[tuple[str, str, str, int], Fault] = {}

    def most(self, runs: int = 1) -> int:
        """The most faults this plan can fire over `runs` runs."""
        return len(self.schedule) * (runs if self.scope == "run" else 1)

    def reach(self, run_id: str, step: str | None, point: str) -> tuple[int, Fault | None]:
        """Count one arrival of `run_id` at (step, point); its occurrence number and the fault, if any."""
        owner = run_id if self.scope == "run" else "*"
        step = step or "?"
        self._counts[(owner, step, point)] += 1
        nth = self._counts[(owner, step, point)]
        fault = self._faults.get((step, point, nth))
        if fault is not None:
            self._fired[(owner, step, point, nth)] = fault
        return nth, fault

    def unfired(self, run_id: str | None = None) -> list[Fault]:
        """Faults that never fired (for `run_id`'s own count in scope "run"; the fleet's in scope "fleet")."""
        owner = "*" if self.scope == "fleet" or run_id is None else run_id
        fired = {(s, p, n) for (o, s, p, n) in self._fired if o == owner or run_id is None}
        return [f for f in self.schedule if (f.step, f.point, f.nth) not in fired]


def fleet_schedule(seed: int, step_points: dict[str, list[str]], runs: int, faults: int,
                   actions: tuple[str, ...] = FLEET_ACTIONS) -> Schedule:
    """A fleet-wide schedule, a pure function of its arguments: `faults` faults, each at a step, a point
    that step reaches, an action, and an occurrence `@N` with N in 1..runs (so the faults spread over
    the fleet's runs). Collisions on (step, point, N) are skipped."""
    candidates = [(s, p, a) for s in step_points for p in step_points[s] for a in actions if fits(a, p)]
    if not candidates:
        return Schedule()
    chosen: dict[tuple[str, str, int], Fault] = {}
    for i in range(faults):
        step, point, action = candidates[derive_seed(seed, 2 * i) % len(candidates)]
        nth = 1 + derive_seed(seed, 2 * i + 1) % max(1, runs)
        chosen.setdefault((step, point, nth), Fault(step, point, action, nth))
    return Schedule(tuple(chosen.values()))
