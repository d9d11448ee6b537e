"""A scenario's failing multi-fault schedules shrunk to the fewest faults that still fail.

1. `shrink(scenario, ctx, failing, max_tries)` runs `scenario.trial` on smaller schedules (`faults.shrink`)
   and keeps the smallest for which the same checker still fails; the trial of it names the schedule it
   was shrunk from (`shrunk_from`), and is returned with how many trials the search ran. None smaller
   fails: the failing trial itself.
2. `with_shrunk(scenario, ctx, trials)` is `trials` plus each failing multi-fault trial shrunk, at most
   `PER_FAILURE` tries each and `scenario.shrink_budget` in all; two failures that shrink to the same
   schedule add it once; a negative control's findings are not shrunk (they are expected).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from killpoint.faults.schedule import Schedule
from killpoint.faults.shrink import shrink as smallest

if TYPE_CHECKING:
    from killpoint.run.context import Context
    from killpoint.run.trial import Trial

PER_FAILURE = 12
"""The most trials shrinking one failure may run."""


class Shrinkable(Protocol):
    """What of a scenario (`run.scenario.Scenario`) shrinking needs: its name, whether it is a negative
    control, its budget of trials, and how one trial of a schedule runs."""

    name: str
    expected_finding: bool
    shrink_budget: int

    def trial(self, ctx: Context, schedule: Schedule) -> Trial: ...


def shrink(scenario: Shrinkable, ctx: Context, failing: Trial, max_tries: int = PER_FAILURE) -> tuple[Trial, int]:
    """Flow step 1: the trial of the smallest schedule that still fails the same way, and the trials run."""
    checker = failing.failing()[0].checker
    tried: dict[str, Trial] = {}

    def still_fails(candidate: Schedule) -> bool:
        trial = tried[str(candidate)] = scenario.trial(ctx, candidate)
        return any(v.checker == checker for v in trial.failing())

    best = smallest(failing.schedule, still_fails, max_tries)
    found = tried.get(str(best))
    if found is None:
        return failing, len(tried)
    found.shrunk_from = failing.schedule
    ctx.say(f"{scenario.name}: shrunk {failing.schedule} ({len(failing.schedule)} faults) to {best} "
            f"({len(best)} fault{'s' if len(best) != 1 else ''}) in {len(tried)} trials")
    return found, len(tried)


def with_shrunk(scenario: Shrinkable, ctx: Context, trials: Sequence[Trial]) -> Sequence[Trial]:
    """Flow step 2: `trials`, then each failure's shrunk trial, within the scenario's shrink budget."""
    from killpoint.run.trial import Trials

    if scenario.expected_finding:
        return trials
    out = Trials(trials)  # a spooled passing trial stays 8 bytes (`Trials`)
    known: set[str] = set()
    spent = 0
    for t in [t for t in trials if t.outcome == "fail" and len(t.schedule) > 1]:
        tries = min(PER_FAILURE, scenario.shrink_budget - spent)
        if tries <= 0:
            ctx.say(f"{scenario.name}: shrink budget spent; {t.schedule} is shown as found")
            break
        small, ran = shrink(scenario, ctx, t, tries)
        spent += max(1, ran)
        if small is not t and str(small.schedule) not in known:
            known.add(str(small.schedule))
            out.append(small)
    return out
