"""fleet: many runs served by several queue workers at once, with faults across the fleet.

`runs` runs are submitted (first checkpoint and a job each) and `workers` queue workers
(`worker --queue --follow`) take them. A fleet-wide schedule from the seed kills or terminates workers
at `faults` (step, point, occurrence) places: `charge:effect.applied:kill@5` is the fifth time any run
of the fleet reaches charge:effect.applied. A worker that ends is replaced; the leases it held lapse;
the agent's sweeper queues the runs nobody is moving. Every run must complete, with every effect
exactly once and as in the crash-free run, and no process may outlive the fleet.

Which run a fault lands on depends on how the workers interleave; the faults themselves (their steps,
points, actions and occurrences) are the schedule's, so a replay of the schedule, or of the seed, hits
the fleet the same way. One trial per run; the summary gives runs, faults and throughput.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import psycopg

from killpoint.faults.plan import FLEET_ACTIONS, FaultPlan, fleet_schedule
from killpoint.faults.schedule import Schedule, derive_seed
from killpoint.reference_agent.sweeper import sweep_stalled
from killpoint.run.fleet import Fleet, FleetStats
from killpoint.run.options import RunOptions
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial


class FleetScenario(Scenario):
    name = "fleet"
    judged_once = False  # which worker takes which run varies from fleet to fleet
    cost = 1.6  # seconds, reference agent, -j 1 (bench/shards.py)
    whole = True  # one trial: --shard places it whole
    summary = "12 runs, 3 queue workers, seeded kills and terms across the fleet; all complete exactly once"
    black_box_reason = "a fleet needs queue workers (worker --queue) sharing the jobs table, which a --worker-cmd does not serve"
    actions = FLEET_ACTIONS
    runs = 12
    workers = 3
    faults = 6
    stale_seconds = 300.0
    fleet_stats: tuple[tuple[str, FleetStats], ...] = ()
    """(run id, what its fleet did) for every run this scenario drove: the summary line's figures."""

    def options(self, base: RunOptions) -> RunOptions:
        return replace(base, budget_cap=40.0)

    def sweep(self, conn: psycopg.Connection, stale_seconds: float) -> list[str]:
        return sweep_stalled(conn, stale_seconds)

    def schedule_from_seed(self, ctx: Context, seed: int) -> Schedule:
        """The fleet-wide schedule of a seed (`fleet_schedule`), not a single run's."""
        return fleet_schedule(seed, self.step_points(ctx), self.runs, self.faults, self.actions_in(ctx))

    def random_plan(self, ctx: Context, count: int, besides: Collection[Schedule] = ()) -> list[tuple[int, Schedule]]:
        """`explore --random N`: N fleets, each under the fleet schedule of a seed derived from the base seed
        (a repeat is run again, `besides` or not: which worker takes which run varies from fleet to fleet)."""
        seeds = [derive_seed(ctx.seed, i) for i in range(count)]
        return [(seed, self.schedule_from_seed(ctx, seed)) for seed in seeds]

    def run(self, ctx: Context) -> list[Trial]:
        schedule = self.schedule_from_seed(ctx, ctx.seed)
        ctx.say(f"{self.name}: seed {ctx.seed} -> schedule {schedule}")
        if not in_shard(self, ctx, [schedule], lambda s: (s, ctx.seed)):  # --shard: one fleet, one trial
            return []
        return self.fleet(ctx, schedule, ctx.seed)

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        """The fleet under `schedule` (with a seed: under the seed's fleet schedule); its first failing
        run (or its first run) stands for it."""
        if seed is not None:
            schedule = self.schedule_from_seed(ctx, seed)
        trials = self.fleet(ctx, schedule, seed)
        return next((t for t in trials if t.outcome != "pass"), trials[0])

    def figures(self, trials: list[Trial]) -> str:
        stats = dict(self.fleet_stats).get(trials[0].run_id) if trials else None
        if stats is None:
            return ""
        rate = stats.done / stats.elapsed if stats.elapsed > 0 else 0.0
        return (f"{stats.done}/{stats.runs} runs done, {stats.faults} faults, "
                f"{stats.incarnations} worker incarnations, {stats.sweeps_queued} resumes swept, "
                f"{rate:.1f} runs/s")

    def fleet(self, ctx: Context, schedule: Schedule, seed: int | None) -> list[Trial]:
        options = self.options(ctx.session.options)
        fleet, base = Fleet.new(ctx.session, self.name, self.runs, options, self.agent(ctx),
                                FaultPlan(schedule, "fleet"))
        with fleet.attached():
            fleet.submit(options.params)
            fleet.drive_queue(self.workers, self.sweep, self.stale_seconds)
        stats = fleet.stats
        self.fleet_stats = (*self.fleet_stats, *((r, stats) for r in fleet.run_ids))
        return [fleet.trial(r, schedule, seed, self.checkers, base) for r in fleet.run_ids]
