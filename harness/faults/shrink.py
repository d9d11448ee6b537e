"""Shrinking a failing schedule: the fewest faults that still fail. Pure: the caller says what failing is.

1. Try the schedule without one fault, each fault in turn, first to last.
2. After dropping a fault, an `@N` with fewer earlier faults on its (step, point) moves down to match
   (`renumber`), so the smaller schedule still means "the same arrivals".
3. The first smaller schedule that `still_fails` becomes the best; start again from it.
4. Stop when no single drop still fails, one fault is left, or `max_tries` candidates were tried.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from killpoint.faults.schedule import Fault, Schedule


def renumber(faults: Iterable[Fault]) -> list[Fault]:
    """After dropping faults, an @N with fewer earlier faults on its (step, point) moves down to match."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for f in faults:
        n = seen.get((f.step, f.point), 0) + 1
        seen[(f.step, f.point)] = n
        out.append(Fault(f.step, f.point, f.action, min(f.nth, n)))
    return out


def shrink(schedule: Schedule, still_fails: Callable[[Schedule], bool], max_tries: int = 12) -> Schedule:
    """The smallest schedule found (by the flow above) that `still_fails`; `schedule` itself if none is."""
    best = schedule
    tries = 0
    changed = True
    while changed and len(best) > 1 and tries < max_tries:
        changed = False
        for i in range(len(best)):
            candidate = Schedule(tuple(renumber(best.faults[:i] + best.faults[i + 1:])))
            tries += 1
            if still_fails(candidate):
                best, changed = candidate, True
                break
            if tries >= max_tries:
                break
    return best
