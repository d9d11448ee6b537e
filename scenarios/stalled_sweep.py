"""stalled-sweep: the workers of several runs die mid-run; two sweepers race to queue their resumes; queue
workers resume them. Each stalled run must be queued once (one job, `resume-<run_id>`, by one sweeper),
taken by one queue worker, and completed, with every effect exactly once.

A round: `runs` runs start together (`worker RUN_ID` each) and each follows the round's schedule, derived
from the agent's crash-free run (`STEP:checkpoint.committed:kill` for a middle step: dead after its
checkpoint, or `STEP:step.start:kill` for an agent of one step; `STEP:effect.applied:kill` for the first
step with an effect). The harness lets the dead
workers' leases lapse (the passage of time), then `sweepers` sweepers, each on its own connection,
start together at a barrier and sweep once. The jobs table is read before anyone takes a job; then
`queue_workers` queue workers (`worker --queue`, until the queue is empty) start together. Runs a
later fault left unfinished are driven to the end by a following queue worker and the sweeper. A session in
which no run stalled tested no sweep: unknown, never a pass.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import psycopg

from killpoint.checkers import CRASH_CHECKERS
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed
from killpoint.events import Event, FaultFired, Note, Point
from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Schedule
from killpoint.reference_agent.queue import resume_job_id
from killpoint.reference_agent.sweeper import sweep_stalled
from killpoint.run.fleet import Fleet, Sweep
from killpoint.run.options import RunOptions
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario, ScenarioResult
from killpoint.run.trial import Trial

BARRIER_SECONDS = 10.0


def resumed_once(ev: Evidence, base: Evidence | None) -> Verdict:
    """A stalled run got exactly one resume job, named `resume-<run_id>`, queued by one sweeper and taken
    by one queue worker (facts the scenario records in `ev.extra`). A run that did not stall (its kill was
    not reached) did not exercise it: `n/a`, never a pass."""
    o = ev.extra
    if not o.get("stalled"):
        return not_applicable("resumed_once", "not exercised: the run did not stall")
    jobs, queued_by, takers = o.get("resume_jobs", []), o.get("queued_by", []), o.get("takers", [])
    problems = []
    if jobs != [resume_job_id(ev.run_id)]:
        problems.append(f"resume jobs queued: {jobs or 'none'} (expected exactly [{resume_job_id(ev.run_id)!r}])")
    if len(queued_by) != 1:
        problems.append(f"queued by {len(queued_by)} sweepers ({', '.join(map(str, queued_by)) or 'none'})")
    if len(takers) != 1:
        problems.append(f"taken by {len(takers)} queue workers ({', '.join(takers) or 'none'})")
    if problems:
        return failed("resumed_once", "the stalled run was not resumed exactly once", problems)
    return passed("resumed_once", f"one job, queued by sweeper {queued_by[0]}, taken by {takers[0]}")


def race_sweepers(dsn: str, sweep: Sweep, count: int, stale_seconds: float) -> list[list[str]]:
    """Run `count` sweepers at once, each on its own connection, released together by a barrier;
    return what each one queued."""
    barrier = threading.Barrier(count)
    queued: list[list[str]] = [[] for _ in range(count)]
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True, application_name=f"killpoint-sweeper-{i + 1}") as conn:
                barrier.wait(timeout=BARRIER_SECONDS)
                queued[i] = sweep(conn, stale_seconds)
        except BaseException as exc:  # reported to the caller below
            barrier.abort()
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), name=f"killpoint-sweeper-{i + 1}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return queued


def race_takers(events: list[Event], race: int, run_id: str, queue_workers: set[str]) -> list[str]:
    """The queue workers that worked on `run_id` under the job the race queued: from the race (event
    number `race`) until the first fault on the run after it, which ends the worker that had taken that
    job (the run is queued again for the next), or the end. A sweep is no boundary: a periodic sweep that
    runs between a worker's claim of the job (which consumes it) and its taking of the lease finds the run
    stalled with no job and queues it again, while that worker goes on to resume it."""
    takers: list[str] = []
    for e in events:
        if e.i <= race or e.run_id != run_id:
            continue
        if isinstance(e, (Point, Note, FaultFired)) and e.inc in queue_workers and e.inc not in takers:
            takers.append(e.inc)
        if isinstance(e, FaultFired):
            break
    return takers


class StalledSweep(Scenario):
    name = "stalled-sweep"
    cost = 1.4  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "workers of several runs die mid-run; two sweepers race; each stalled run is resumed exactly once"
    actions = ("kill",)
    checkers = CRASH_CHECKERS
    """Judged by these and by `resumed_once` (this module's own checker)."""
    runs = 4
    sweepers = 2
    queue_workers = 2
    stale_seconds = 300.0
    """The sweepers' stall threshold; the harness expires the dead workers' leases instead of waiting."""
    def schedules(self, ctx: Context) -> list[Schedule]:
        """One round per schedule, each derived from the agent's crash-free run: dead after the checkpoint
        of a middle step (so the run stalls half-way; an agent of one step has none, and its worker dies as
        that step starts instead: after its last checkpoint a run is done, and nothing stalls), and dead right
        after the first effect is applied (so the resumed run meets an applied, unrecorded effect)."""
        points = self.step_points(ctx)
        steps = [s for s in points if "checkpoint.committed" in points[s]][:-1]
        out = []
        if steps:
            out.append(Schedule.parse(f"{steps[len(steps) // 2]}:checkpoint.committed:kill"))
        elif first := next((s for s in points if "step.start" in points[s]), None):
            out.append(Schedule.parse(f"{first}:step.start:kill"))
        effect = next((s for s in points if "effect.applied" in points[s]), None)
        if effect is not None:
            out.append(Schedule.parse(f"{effect}:effect.applied:kill"))
        return out

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.session.env.black_box:
            return "a black-box worker has no queue mode (worker --queue) for the sweeper to resume it through"
        return None

    def sweep(self, conn: psycopg.Connection, stale_seconds: float) -> list[str]:
        """The sweeper under test: the reference agent's."""
        return sweep_stalled(conn, stale_seconds)

    def options(self, base: RunOptions) -> RunOptions:
        return replace(base, budget_cap=40.0)

    def run(self, ctx: Context) -> list[Trial]:
        trials: list[Trial] = []
        for schedule in in_shard(self, ctx, self.schedules(ctx), lambda s: (s, None)):
            round_trials = self.round(ctx, schedule)
            ctx.say(f"{self.name}: {schedule} x{self.runs} runs -> "
                    f"{', '.join(t.outcome for t in round_trials)}")
            trials += round_trials
        return trials

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        """One round with `schedule`; its first failing run (or its first run) stands for it."""
        trials = self.round(ctx, schedule, seed)
        return next((t for t in trials if t.outcome != "pass"), trials[0])

    def result(self, trials: list[Trial], started: float) -> ScenarioResult:
        """As any scenario's, but one in which no run stalled tested no sweep: unknown, saying so, never a
        pass (its trials judged only the kills)."""
        res = super().result(trials, started)
        if trials and res.outcome == "pass" and not any(t.evidence.extra.get("stalled") for t in trials):
            return replace(res, outcome="unknown", reason="no run stalled: every kill left its run done or never "
                           "started, so the sweepers had nothing to resume and no sweep was tested (a schedule "
                           "that kills a worker between two checkpoints settles it: replay --schedule)")
        return res

    def figures(self, trials: list[Trial]) -> str:
        stalled = [t for t in trials if t.evidence.extra.get("stalled")]
        jobs = sum(len(t.evidence.extra.get("resume_jobs", [])) for t in stalled)
        takers = {w for t in stalled for w in t.evidence.extra.get("takers", [])}
        return (f"{len(stalled)} runs stalled, {jobs} resume jobs from {self.sweepers} racing sweepers, "
                f"taken by {len(takers)} queue workers")

    def round(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> list[Trial]:
        """Kill, race the sweepers, resume; one trial per run."""
        s = ctx.session
        fleet, base = Fleet.new(s, self.name, self.runs, self.options(s.options), self.agent(ctx),
                                FaultPlan(schedule, "run"))
        run_ids = fleet.run_ids
        with fleet.attached():
            first = [fleet.spawn_run_worker(r) for r in run_ids]
            fleet.wait_ended(first)
            stalled = [r for r, status in fleet.statuses().items() if status in ("running", "paused")]
            fleet.expire_ended()
            queued = race_sweepers(s.env.pg.dsn, self.sweep, self.sweepers, self.stale_seconds)
            race = s.history.append("sweep.race", run_id=None, stalled=stalled, queued=queued)
            with s.env.connect() as conn:
                jobs = conn.execute("SELECT id, run_id FROM jobs WHERE run_id = ANY(%s) ORDER BY id",
                                    (run_ids,)).fetchall()
            resumers = [fleet.spawn_queue_worker(follow=False) for _ in range(self.queue_workers)]
            fleet.wait_ended(resumers)
            if any(st not in ("done", "failed") for st in fleet.statuses().values()):
                fleet.drive_queue(1, self.sweep, self.stale_seconds)  # a later fault: finish the runs
        events = s.history.events()
        queue_workers = {i.inc for i in fleet.incarnations if i.role == "queue"}
        return [fleet.trial(r, schedule, seed, (*self.checkers, resumed_once), base, extra={
            "stalled": r in stalled, "resume_jobs": [j for j, run in jobs if run == r],
            "queued_by": [i + 1 for i, q in enumerate(queued) if r in q],
            "takers": race_takers(events, race.i, r, queue_workers)}) for r in run_ids]
