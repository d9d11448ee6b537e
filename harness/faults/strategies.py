"""Hypothesis strategies for fault schedules of a given agent, shrinking toward fewer and earlier faults.

Hypothesis is imported when a strategy is built, never when this module is imported. The agent's points
are given (a `StepPoints` mapping, or a callable that measures them): this module runs nothing.

1. The candidates are the (step, point, action) triples of the agent's crash-free run, in the order the
   run reached them (a `StepPoints` mapping: `killpoint.crash_free_points`, or written by hand), each
   point with every action that fits it (`faults.points.fits`).
2. A schedule is a list of 1..`max_faults` candidates drawn with `sampled_from`: Hypothesis shrinks a list
   toward fewer elements and `sampled_from` toward its first element, so a failing schedule shrinks to
   the fewest faults at the earliest points, with `kill` (listed first) before `term`.
3. A candidate drawn again on a (step, point) already used takes the next occurrence (`@2`, `@3`...), which
   a resumed incarnation reaches again, so every drawn schedule is valid (`Schedule.parse(str(s)) == s`).
   Given `occurrences` (the points the run reached `k` > 1 times: a loop's later passes,
   `killpoint.crash_free_run`), each candidate also draws which of the `k` its first fault on that
   point takes; the number shrinks toward 0, the first pass. Without them nothing more is drawn.

`deferred_schedules(measure)` calls `measure()` for the points only when the first schedule is drawn.
`killpoint.schedules_for(steps)` (harness/run/points.py) is that over the points the agent `steps` reaches.
A complete test (this is the example `tests/faults/test_strategies.py` runs):

    import killpoint
    from hypothesis import HealthCheck, given, settings
    from killpoint import schedules_for

    @settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(schedule=schedules_for("killpoint.reference_agent.invoice_agent", max_faults=2))
    def test_any_two_faults_are_survived(killpoint_session, schedule):
        killpoint.expect(killpoint_session.trial(schedule, explicit=False))

(`explicit=False`: a generated fault the run never reaches is not a finding.) The first call measures
the agent's points (a crash-free run, cached under `.killpoint/cache/points` by the agent's digest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from killpoint.faults.points import fits
from killpoint.faults.schedule import Fault, Occurrences, Schedule, StepPoints

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def candidates(points: StepPoints, actions: Sequence[str] = ("kill", "term")) -> list[tuple[str, str, str]]:
    """Flow step 1: every (step, point, action) of `points` in run order, each fitting action in turn."""
    return [(s, p, a) for s in points for p in points[s] for a in actions if fits(a, p)]


def number(drawn: Sequence[tuple[str, str, str]], passes: Sequence[int] = (),
           occurrences: Occurrences | None = None) -> Schedule:
    """Flow step 3: drawn candidates as a schedule, a repeated (step, point) taking the next occurrence; the
    first fault on a point reached `k` > 1 times (`occurrences`) takes occurrence `1 + passes[i] % k`."""
    times = occurrences or {}
    used: dict[tuple[str, str], int] = {}
    faults = []
    for i, (step, point, action) in enumerate(drawn):
        reached = times.get(step, {}).get(point, 1)
        first = 1 + passes[i] % reached if i < len(passes) and reached > 1 else 1
        nth = used[(step, point)] = used[(step, point)] + 1 if (step, point) in used else first
        faults.append(Fault(step, point, action, nth))
    return Schedule(tuple(faults))


def schedules(points: StepPoints, *, actions: Sequence[str] = ("kill", "term"), min_faults: int = 1,
              max_faults: int = 3, occurrences: Occurrences | None = None) -> SearchStrategy[Schedule]:
    """Schedules of `min_faults`..`max_faults` faults at these points (flow steps 1-3)."""
    from hypothesis import strategies as st

    from killpoint.errors import UsageError

    pool = candidates(points, actions)
    if not pool:
        raise UsageError("no-points", f"no kill point of these steps fits the actions {', '.join(actions)}",
                         "give the points of a crash-free run (killpoint.crash_free_points) and kill/term")
    if not occurrences:
        return st.lists(st.sampled_from(pool), min_size=min_faults, max_size=max_faults).map(number)
    most = max(n for counts in occurrences.values() for n in counts.values())
    picks = st.lists(st.tuples(st.sampled_from(pool), st.integers(0, most - 1)), min_size=min_faults,
                     max_size=max_faults)
    return picks.map(lambda drawn: number([c for c, _ in drawn], [k for _, k in drawn], occurrences))


def deferred_schedules(measure: Callable[[], StepPoints], *,
                       occurrences: Callable[[], Occurrences] | None = None,
                       **kwargs: Any) -> SearchStrategy[Schedule]:  # noqa: ANN401
    """`schedules(measure(), occurrences=occurrences(), **kwargs)`, with `measure` and `occurrences` called
    the first time a schedule is drawn (not at import or collection)."""
    from hypothesis import strategies as st

    return st.deferred(lambda: schedules(measure(), occurrences=occurrences() if occurrences else None,
                                         **kwargs))
