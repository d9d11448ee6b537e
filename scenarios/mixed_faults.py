"""mixed-faults: a service fault and a process fault in the same run.

Some bugs need both: an effect sent from a thread the step does not join is lost only when a 5xx makes the
client back off and a kill comes before its retry. The plan (harness/faults/mixed.py):

1. each service `error` a step meets, followed by a kill at the same step's `checkpoint.committed` and at
   the next step's `step.start` (`pairs`);
2. an outage at each request point (every request of that service fails until the run is resumed: the
   client's retries cannot hide it), and a clock jump at each step's checkpoint.writing (the worker is
   killed and resumed a year and a day later, or an hour earlier) (`lasting`);
3. then random mixed schedules from the run's seed, each of 2 faults up to the fault budget (one per step),
   at least one of each kind, outages and clock jumps among them, a loop's later passes too (`mixed_schedules`
   with the crash-free run's occurrences); a seed replays as the same mixed schedule.

`--actions` narrows each part to the actions it names (a pair needs `error` and `kill`; a random schedule a
service and a process action); a session that leaves none of them skips the scenario, saying why.

Judged by every crash checker plus `retries_keep_keys`. A failing schedule shrinks like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from killpoint.checkers import CRASH_CHECKERS
from killpoint.faults.mixed import (
    PROCESS_MIX,
    SERVICE_ACTIONS,
    lasting,
    mixed_from_seed,
    pairs,
)
from killpoint.faults.points import base
from killpoint.faults.schedule import Schedule, distinct
from killpoint.run.plans import run_plan
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial


class MixedFaults(Scenario):
    name = "mixed-faults"
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 18.1  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = ("a 5xx or a lost answer and a kill in the same run, outages that outlast the retries, "
               "a resume with the clock moved")
    checkers = (*CRASH_CHECKERS, "retries_keep_keys")
    actions = tuple(dict.fromkeys(base(a) for a in (*PROCESS_MIX, *SERVICE_ACTIONS)))
    concrete = tuple(dict.fromkeys((*PROCESS_MIX, *SERVICE_ACTIONS)))  # `--exhaustive`: each jump, each outage

    def kinds(self, ctx: Context) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The service and the process actions `--actions` allows (every one of each by default)."""
        allowed = set(self.actions_in(ctx))
        return (tuple(a for a in SERVICE_ACTIONS if base(a) in allowed),
                tuple(a for a in PROCESS_MIX if base(a) in allowed))

    def skip_reason(self, ctx: Context) -> str | None:
        """Skipped when `--actions` leaves none of its schedules: a pair needs `error` and `kill`, a lasting
        fault `outage` or `clock`, a random one a service fault and a process fault."""
        allowed = set(self.actions_in(ctx))
        service, process = self.kinds(ctx)
        if {"error", "kill"} <= allowed or allowed & {"outage", "clock"} or (service and process):
            return None
        return (f"its schedules need a service fault ({', '.join(dict.fromkeys(map(base, SERVICE_ACTIONS)))}) and "
                f"a process fault ({', '.join(dict.fromkeys(map(base, PROCESS_MIX)))}) among --actions, or outage "
                f"or clock alone")

    def systematic(self, ctx: Context) -> list[Schedule]:
        """The pairs, then the lasting faults (flow steps 1 and 2), of the actions `--actions` allows."""
        points = self.step_points(ctx)
        allowed = set(self.actions_in(ctx))
        return [s for s in pairs(points) + lasting(points) if all(base(f.action) in allowed for f in s)]

    def run(self, ctx: Context) -> list[Trial]:
        plan = self.systematic(ctx)
        trials = run_plan(self, ctx, [(None, s) for s in plan],
                          lambda i, _seed, schedule, trial: f"{self.name}: [{i}/{len(plan)}] {schedule} -> {trial.outcome}")
        return trials + self.random(ctx, ctx.random_count, stop_on_budget=True, besides=plan)

    def seed_schedules(self, ctx: Context) -> Callable[[int], Schedule]:
        """What a seed stands for (`replay --seed`, `random_plan`): its mixed schedule (`mixed_from_seed`)."""
        points, occurrences, kinds = self.step_points(ctx), self.occurrences(ctx), self.kinds(ctx)
        return lambda seed: mixed_from_seed(seed, points, None, occurrences, *kinds)

    def random_plan(self, ctx: Context, count: int, besides: Collection[Schedule] = ()) -> list[tuple[int, Schedule]]:
        """`count` mixed schedules (`mixed_from_seed`), none empty, alike or among `besides`
        (`faults.schedule.distinct`)."""
        return distinct(ctx.seed, count, self.seed_schedules(ctx), keep=len, besides=besides)
