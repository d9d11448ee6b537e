"""concurrent-runs: several runs of one customer at once, judged together and against the same runs done one
after another.

`RUNS` runs of the same invoice parameters (one customer account) are served by as many queue workers at
once, held together at the start of every step until all of them are there (run/rendezvous.py: a
barrier, whatever the agent names its steps), so that each step's work begins in every run at the same
moment: every run reads what it reads before any writes what it read back (what a busy production queue
does now and then). Then the same runs again, from where the first set left the agent's tables, served by
one queue worker: one after another.

Judged, each run of both sets: by every crash checker against the crash-free run (a memo one process keeps
across the runs it serves shows in the serial set); each concurrent run also by `invariants_hold` on the
agent's declared `INVARIANTS` over each set; and by `same_as_serial`: each declared quantity
and the runs' own effects (`OWN_EFFECTS_SQL`) moved alike concurrently and serially. A balance read outside
the checkpoint transaction and written back later loses an update here; a per-process memo shared across
runs is found by `exactly_once` and the invariants. The schedule is the seed's fleet schedule of kills
over the concurrent set (`replay --seed N`), or none (`--schedule` of faults for the concurrent set).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import replace

import psycopg

from killpoint.checkers import CRASH_CHECKERS
from killpoint.checkers.evidence import aliases, normalize
from killpoint.checkers.invariants import FACTS
from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Schedule, derive_seed
from killpoint.reference_agent.sweeper import sweep_stalled
from killpoint.run.fleet import Fleet
from killpoint.run.options import RunOptions
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial

RUNS = 3
HELD = "held"
"""The evidence record of how a concurrent set was held together (`run.rendezvous`): the set (its fleet's
name), the steps all its runs began at once, and where it let them go without one (step, missing runs)."""


class ConcurrentRuns(Scenario):
    name = "concurrent-runs"
    judged_once = False  # the seed varies the interleaving of an empty schedule
    cost = 1.3  # seconds, reference agent, -j 1 (bench/shards.py)
    whole = True  # one trial: --shard places it whole
    summary = "3 runs of one customer at once, then the same runs one after another: own tables must agree"
    black_box_reason = "the runs are served by queue workers (worker --queue), which a --worker-cmd does not serve"
    checkers = CRASH_CHECKERS
    actions = ("kill",)

    def options(self, base: RunOptions) -> RunOptions:
        return replace(base, budget_cap=40.0)

    def schedule_from_seed(self, ctx: Context, seed: int) -> Schedule:
        """No faults: the concurrency is the test (a seed names the same empty schedule)."""
        return Schedule()

    def random_plan(self, ctx: Context, count: int, besides: Collection[Schedule] = ()) -> list[tuple[int, Schedule]]:
        """`explore --random N`: N more pairs of sets, each under its seed (no faults: the interleaving varies,
        so the same empty schedule is run again, `besides` or not)."""
        return [(derive_seed(ctx.seed, i), Schedule()) for i in range(count)]

    def run(self, ctx: Context) -> list[Trial]:
        if not in_shard(self, ctx, [Schedule()], lambda s: (s, ctx.seed)):  # --shard: both sets are one trial
            return []
        return self.together(ctx, Schedule(), ctx.seed)

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None, run_id: str | None = None) -> Trial:
        """Both sets under `schedule` (with a seed: the seed's schedule); the first failing run stands for them."""
        if seed is not None:
            schedule = self.schedule_from_seed(ctx, seed)
        trials = self.together(ctx, schedule, seed)
        return next((t for t in trials if t.outcome != "pass"), trials[0])

    def sweep(self, conn: psycopg.Connection, stale_seconds: float) -> list[str]:
        return sweep_stalled(conn, stale_seconds)

    def together(self, ctx: Context, schedule: Schedule, seed: int | None) -> list[Trial]:
        """The concurrent set, then the serial one; the concurrent runs judged with both sets' facts."""
        options = self.options(ctx.session.options)
        agent = self.agent(ctx)
        concurrent, base = Fleet.new(ctx.session, self.name, RUNS, options, agent, FaultPlan(schedule, "fleet"))
        held = concurrent.hold_together()
        with concurrent.attached():
            concurrent.submit(options.params)
            concurrent.drive_queue(RUNS, self.sweep)
        concurrent.invariant_facts()  # measured now, before the serial set moves the same tables
        serial, _ = Fleet.new(ctx.session, f"{self.name}-serial", RUNS, options, agent,
                              FaultPlan(Schedule(), "fleet"))
        with serial.attached():
            serial.submit(options.params)
            serial.drive_queue(1, self.sweep)
        moved = {name: {"concurrent": value, "serial": serial.moved().get(name)}
                 for name, value in concurrent.moved().items()}
        own = {"own effects": {"concurrent": own_effects(concurrent), "serial": own_effects(serial)}}
        extra = {"serial": {**moved, **own},
                 FACTS: [{**f, "name": f"{f['name']} (the same runs, serially)"} for f in serial.invariant_facts()],
                 HELD: {"set": concurrent.name, "together": held.together, "timeout": held.timeout,
                        "missing": list(held.missing) if held.missing else None}}
        trials = [concurrent.trial(r, schedule, seed, self.checkers, base, extra) for r in concurrent.run_ids]
        trials += [serial.trial(r, Schedule(), seed, self.checkers, base) for r in serial.run_ids]
        outcomes = {t.outcome for t in trials}
        worst = next(o for o in ("fail", "unknown", "pass") if o in outcomes or o == "pass")
        ctx.say(f"{self.name}: {RUNS} runs at once, then one after another ({len(trials)} runs) -> {worst}")
        return trials

    def figures(self, trials: list[Trial]) -> str:
        """One pair of sets (`killpoint run`) or several (`explore --random`), and how the concurrent sets
        were held: from the `HELD` record of each set's concurrent runs."""
        sets = {h["set"]: h for t in trials if (h := t.evidence.extra.get(HELD))}
        if not sets:
            return ""
        if len(sets) == 1:
            (held,) = sets.values()
            return (f"{2 * RUNS} runs: {RUNS} at once ({held_line(held)}), then the same {RUNS} one after "
                    "another")
        let_go = [h for h in sets.values() if h["missing"]]
        line = f"{len(sets)} pairs of sets ({2 * RUNS * len(sets)} runs): {RUNS} at once, then one after another; " \
               f"{len(sets) - len(let_go)} held together at every step"
        return line + (f", {len(let_go)} let go where a run did not come within {let_go[0]['timeout']:g}s" if let_go else "")


def held_line(held: dict) -> str:
    """How one concurrent set was held together: at each step's start, or up to where it broke."""
    if not held["missing"]:
        return f"each of {len(held['together'])} steps begun together"
    step, missing = held["missing"]
    return (f"{len(held['together'])} steps begun together, then {', '.join(missing)} not at {step!r} within "
            f"{held['timeout']:g}s (a run waiting on another, or on another path): held no more")


def own_effects(fleet: Fleet) -> list[list]:
    """The own effects of a set of runs, as a sorted multiset: what the runs left in the agent's tables, each
    run's rows with its run-specific names (its run id, its keys, the ids the providers minted for its
    effects: `checkers.evidence.aliases`) replaced by placeholders, so the same work done twice compares equal."""
    if not fleet.agent.own_effects_sql:
        return []
    rows: list[tuple[str, ...]] = []
    with fleet.env.pooled() as conn:
        for run in fleet.run_ids:
            names = aliases(run, fleet.env.services.effects(run))
            rows += [tuple(normalize([str(v) for v in r], names))
                     for r in conn.execute(fleet.agent.own_effects_sql, (run,)).fetchall()]
    return sorted([list(k) + [n] for k, n in Counter(rows).items()])
