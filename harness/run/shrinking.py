"""A scenario's failing multi-fault schedules shrunk to the fewest faults that still fail.

1. `shrink(scenario, ctx, failing, max_tries, judged)` runs `scenario.trial` on smaller schedules
   (`faults.shrink`) and keeps the smallest for which the same checker still fails; the trial of it names the
   schedule it was shrunk from (`shrunk_from`), and is returned with how many trials the search ran. None
   smaller fails: the failing trial itself. A candidate in `judged` (schedule text -> its trial if it failed
   a checker, else None) is answered from it and not run again; each one run is added to it.
2. `with_shrunk(scenario, ctx, trials)` is `trials` plus each failing multi-fault trial shrunk, at most
   `PER_FAILURE` candidates each and `scenario.shrink_budget` trials run in all; two failures that shrink to
   the same schedule add it once; a negative control's findings are not shrunk (they are expected). Where a
   trial is a function of its schedule (`scenario.judged_once`), `judged` starts as the scenario's own trials
   and is shared by every failure's search, so a candidate the sweep or an earlier search judged is not run
   again, and a failure that shrinks to a schedule among `trials` adds nothing (its trial is there) but the
   line saying so.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
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
    control, its budget of trials, whether a trial is a function of its schedule, and how one trial of a
    schedule runs."""

    name: str
    expected_finding: bool
    shrink_budget: int
    judged_once: bool

    def trial(self, ctx: Context, schedule: Schedule) -> Trial: ...


Judged = dict[str, "Trial | None"]
"""Schedule text -> its trial where it failed a checker, None where it failed none."""


def shrink(scenario: Shrinkable, ctx: Context, failing: Trial, max_tries: int = PER_FAILURE,
           judged: Judged | None = None, shown: Collection[int] = ()) -> tuple[Trial, int]:
    """Flow step 1: the trial of the smallest schedule that still fails the same way, and the trials run. A
    trial found among `shown` (ids of trials the caller shows already) is returned as it is, and said so."""
    checker = failing.failing()[0].checker
    known: Judged = {} if judged is None else judged
    ran = 0

    def still_fails(candidate: Schedule) -> bool:
        nonlocal ran
        key = str(candidate)
        if key not in known:
            trial = scenario.trial(ctx, candidate)
            ran += 1
            known[key] = trial if trial.failing() else None
        found = known[key]
        return found is not None and any(v.checker == checker for v in found.failing())

    best = smallest(failing.schedule, still_fails, max_tries)
    found = known.get(str(best)) if best != failing.schedule else None
    if found is None:
        return failing, ran
    n, m = len(failing.schedule), len(best)
    said = (f"{scenario.name}: shrunk {failing.schedule} ({n} faults) to {best} ({m} fault{'s' if m != 1 else ''}) "
            f"in {ran} trial{'s' if ran != 1 else ''}")
    if id(found) in shown:
        ctx.say(f"{said}; {best} was judged already ({found.run_id})")
        return found, ran
    found.shrunk_from = failing.schedule
    ctx.say(said)
    return found, ran


def with_shrunk(scenario: Shrinkable, ctx: Context, trials: Sequence[Trial]) -> Sequence[Trial]:
    """Flow step 2: `trials`, then each failure's shrunk trial, within the scenario's shrink budget."""
    from killpoint.run.trial import Trials

    if scenario.expected_finding:
        return trials
    out = Trials(trials)  # a spooled passing trial stays 8 bytes (`Trials`)
    failures: list[Trial] = []
    judged: Judged | None = {} if scenario.judged_once else None
    shown: set[int] = set()  # the failing trials shown: given, or added below
    for t in trials:
        bad = t.failing()
        if judged is not None:
            judged[str(t.schedule)] = t if bad else None
        if bad:
            shown.add(id(t))
        if t.outcome == "fail" and len(t.schedule) > 1:
            failures.append(t)
    added: set[str] = set()
    spent = 0
    for t in failures:
        tries = min(PER_FAILURE, scenario.shrink_budget - spent)
        if tries <= 0:
            ctx.say(f"{scenario.name}: shrink budget spent; {t.schedule} is shown as found")
            break
        small, ran = shrink(scenario, ctx, t, tries, judged, shown)
        spent += ran
        if id(small) not in shown and str(small.schedule) not in added:
            added.add(str(small.schedule))
            shown.add(id(small))
            out.append(small)
    return out
