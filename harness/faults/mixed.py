"""Schedules that mix service faults and process faults, with the number of faults bounded by a budget.

Some bugs show only when a service misbehaves and a process dies in the same run: an effect sent from a
thread the step does not join is lost only when a 5xx makes the client back off and a kill comes before the
retry. No single fault, and no schedule of one kind of fault, finds it.

1. `fault_budget(step_points)`: how many faults a schedule may hold: one per step the agent has (at least
   two, so that a service fault and a process fault fit), not a constant: a longer agent gets longer
   schedules.
2. `pairs(step_points)`: the systematic part. For each service fault a step can meet (`error` at
   `effect.received`, `effect.applied` (the ambiguous failure: applied, then a 5xx) or `model.request`,
   the points the crash-free run reached), one schedule with a kill
   right after it: at the same step's `checkpoint.committed`, and at the next step's `step.start`, in step
   order. Pure: same steps, same pairs.
3. `lasting(step_points)`, also systematic: an `outage` (every request of the service fails until the run is
   resumed) at each request point of the crash-free run, alone: the client's retries all fail, so the error
   reaches the step; and a clock jump (`CLOCK_JUMPS`: a kill whose resume is a year and a day later, and one
   an hour earlier) at each step's `checkpoint.writing`, where a step that read the clock is redone.
4. `mixed_from_seed(seed, step_points, budget, occurrences)`: a random schedule of 2..budget faults, a pure
   function of its arguments, holding at least one service fault and one process fault (the first two draws
   are one of each; the rest from both). Where the crash-free run reached a point `k` > 1 times (a loop's
   later passes), the first fault on it also draws which of the `k` (a point reached once draws nothing
   more: a loop-free agent's seeds are unchanged). A later fault on a (step, point) already used takes the
   next occurrence.
   Service faults include outages of `faults.outage.LENGTHS` (until resumed, and longer than any client's
   retries); process faults include the clock jumps.
5. `mixed_schedules(base_seed, count, step_points, budget, occurrences)`: `count` of them, each with its own derived seed.

Shrinking (`faults.shrink`) needs nothing more: it drops faults of any kind and renumbers occurrences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from killpoint.faults.outage import LENGTHS
from killpoint.faults.points import fits, is_process
from killpoint.faults.schedule import (
    Fault,
    Occurrences,
    Schedule,
    _Rng,
    derive_seed,
    fault_budget,
    next_occurrence,
)

StepPoints = Mapping[str, Sequence[str]]

SERVICE_ACTIONS: tuple[str, ...] = ("error", "drop", *LENGTHS)
"""The service faults a mixed schedule draws from (a 5xx before or after applying; an answer lost after
applying; an outage that outlasts the client's retries), at every point each fits (`faults.points.fits`)."""
CLOCK_JUMPS: tuple[str, ...] = ("clock+366d", "clock-1h")
"""The clock faults drawn: a resume a year and a day later (across a day, a month and a year boundary,
whatever the date) and one an hour earlier (across an hour boundary, backwards: a skewed clock)."""
PROCESS_MIX: tuple[str, ...] = ("kill", "term", *CLOCK_JUMPS)
"""The process faults a mixed schedule draws from."""


def pairs(step_points: StepPoints) -> list[Schedule]:
    """Each service `error` a step can meet, followed by a kill (flow step 2)."""
    steps = list(step_points)
    out: list[Schedule] = []
    for i, step in enumerate(steps):
        for point in step_points[step]:
            if not fits("error", point):
                continue
            error = Fault(step, point, "error")
            if "checkpoint.committed" in step_points[step]:
                out.append(Schedule((error, Fault(step, "checkpoint.committed", "kill"))))
            if i + 1 < len(steps) and "step.start" in step_points[steps[i + 1]]:
                out.append(Schedule((error, Fault(steps[i + 1], "step.start", "kill"))))
    return out


def lasting(step_points: StepPoints) -> list[Schedule]:
    """An `outage` at each request point, and each clock jump at each step's `checkpoint.writing` (flow step 3)."""
    out = [Schedule((Fault(step, point, "outage"),)) for step in step_points for point in step_points[step]
           if fits("outage", point)]
    out += [Schedule((Fault(step, "checkpoint.writing", jump),)) for step in step_points for jump in CLOCK_JUMPS
            if "checkpoint.writing" in step_points[step]]
    return out


def mixed_from_seed(seed: int, step_points: StepPoints, budget: int | None = None,
                    occurrences: Occurrences | None = None, service_actions: Sequence[str] = SERVICE_ACTIONS,
                    process_actions: Sequence[str] = PROCESS_MIX) -> Schedule:
    """A random mixed schedule (flow step 4); empty when the steps offer no service point, or either kind of
    action is left out (`--actions`: the defaults are every action of each kind)."""
    budget = fault_budget(step_points) if budget is None else budget
    rng = _Rng(seed)
    every = [(s, p) for s in step_points for p in step_points[s]]
    service = [(s, p, a) for s, p in every for a in service_actions if fits(a, p)]
    process = [(s, p, a) for s, p in every for a in process_actions if is_process(a)]
    if not service or not process or budget < 2:
        return Schedule()
    count = 2 + rng.below(budget - 1)
    drawn = [service[rng.below(len(service))], process[rng.below(len(process))]]
    both = service + process
    drawn += [both[rng.below(len(both))] for _ in range(count - 2)]
    order = {(s, p): n for n, (s, p) in enumerate(every)}
    drawn.sort(key=lambda c: order[(c[0], c[1])])  # in the order a run reaches them: easier to read
    used: dict[tuple[str, str], int] = {}
    return Schedule(tuple(Fault(step, point, action, next_occurrence(rng, used, step, point, occurrences))
                          for step, point, action in drawn))


def mixed_schedules(base_seed: int, count: int, step_points: StepPoints, budget: int | None = None,
                    occurrences: Occurrences | None = None, service_actions: Sequence[str] = SERVICE_ACTIONS,
                    process_actions: Sequence[str] = PROCESS_MIX) -> list[tuple[int, Schedule]]:
    """`count` mixed schedules (flow step 5), as (seed, schedule)."""
    out = []
    for i in range(count):
        seed = derive_seed(base_seed, i)
        out.append((seed, mixed_from_seed(seed, step_points, budget, occurrences, service_actions, process_actions)))
    return out
