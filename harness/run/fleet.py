"""A controller of many runs at once: queue workers, single-run workers, sweeps, faults across the fleet.

`RunController` drives one run through one worker at a time. A queue worker (`worker --queue`) serves
many runs, one after another, so its kill points belong to whichever run it is working on. `Fleet`
owns every incarnation of a group of runs:

1. it attaches one `RunPort` per run (and one per queue worker, for its start and exit) to the
   `Environment`: the port is the run's `RunListener` and the nemesis's `Target` for that run;
2. one `FaultPlan` (the same as a single run's) decides whether a fault fires where a run arrives: every
   run on its own (`scope="run"`), or one count for the whole fleet (`scope="fleet"`: `@N` is the N-th
   time any run of the fleet reaches that step and point);
3. one `StepAttribution` (the same rule as a single run's) names the step of each service request;
4. the `Nemesis` applies every action: kill, term, stop (a successor worker of that run takes over while
   the frozen one waits), db-crash, and the service faults;
5. `drive_queue` keeps N queue workers (`--queue --follow`) alive until every run is done: a worker
   that ended is replaced, the leases it held are expired (the passage of time, as for a dead worker
   in `RunController`), and the agent's own sweeper queues the runs nobody is moving;
6. `evidence(run_id)` records one run's evidence exactly as a single-run trial does, with the
   incarnations that worked on that run.

Threads: barrier and service threads call the `on_*` methods; the launcher's reader thread calls
`on_exit` (which only records and wakes the loop); the loop that called `drive_queue` does the
database work (lease expiry, sweeps, status).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import psycopg

from killpoint.checkers import CheckerRef
from killpoint.checkers.evidence import Evidence
from killpoint.env import peers
from killpoint.env.environment import Environment
from killpoint.env.launcher import Incarnation
from killpoint.env.postgres.handle import PostgresHandle
from killpoint.env.stepmodule import AgentSpec
from killpoint.env.worker_env import incarnation_env
from killpoint.fake_services.hooks import Decision
from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Fault, Schedule
from killpoint.run import evidence as evidence_mod
from killpoint.run.attribution import StepAttribution
from killpoint.run.controller import kill_all
from killpoint.run.history import History
from killpoint.run.nemesis import Nemesis
from killpoint.run.options import RunOptions
from killpoint.run.trial import Session, Trial, judge

Sweep = Callable[[psycopg.Connection, float], list[str]]
"""A sweeper: (connection, stale seconds) -> the run ids it queued."""


class RunPort:
    """One run id of the fleet: its `RunListener` (the environment routes its events here, and on to the
    fleet) and the nemesis's `Target` for it (a `stop` spawns a successor worker of this run)."""

    def __init__(self, fleet: Fleet, run_id: str) -> None:
        self.fleet = fleet
        self.run_id = run_id
        self.history = fleet.history
        self.options = fleet.options
        self.nemesis = Nemesis(self)

    # RunListener
    @property
    def incarnations(self) -> list[Incarnation]:
        return self.fleet.touched.get(self.run_id, [])

    def on_start(self, inc: Incarnation) -> None:
        self.fleet.on_start(inc)

    def on_exit(self, inc: Incarnation) -> None:
        self.fleet.on_exit(inc)

    def on_worker_point(self, msg: dict) -> bool:
        return self.fleet.on_worker_point(self.run_id, msg)

    def on_held_point(self, step: str | None, point: str, inc_id: str | None, source: str,
                      seq: int | None = None) -> bool:
        return self.fleet.on_held_point(self.run_id, step, point, inc_id, source, seq)

    def on_service_point(self, point: str, info: dict) -> Decision:
        return self.fleet.on_service_point(self.run_id, point, info)

    def on_note(self, msg: dict) -> None:
        self.fleet.on_note(self.run_id, msg)

    # nemesis Target
    @property
    def pg(self) -> PostgresHandle:
        return self.fleet.env.pg

    def connect(self) -> psycopg.Connection:
        return self.fleet.env.connect()

    def expire_lease(self) -> None:
        with self.fleet.env.connect() as conn:
            conn.execute("UPDATE leases SET expires_at = now() - interval '1 second' WHERE run_id = %s",
                         (self.run_id,))

    def spawn_successor(self) -> Incarnation:
        return self.fleet.spawn_run_worker(self.run_id, role="successor")

    def remaining(self) -> float:
        return self.fleet.remaining()


@dataclass
class FleetStats:
    """What the fleet did: for the summary line."""

    runs: int = 0
    done: int = 0
    faults: int = 0
    incarnations: int = 0
    sweeps_queued: int = 0
    elapsed: float = 0.0


class Fleet:
    """The incarnations, faults and evidence of a group of runs. Use `attached()` around the work."""

    def __init__(self, env: Environment, history: History, name: str, run_ids: list[str], options: RunOptions,
                 agent: AgentSpec, plan: FaultPlan) -> None:
        self.env = env
        self.history = history
        self.name = name
        self.run_ids = list(run_ids)
        self.options = options
        self.agent = agent
        self.plan = plan
        self.steps = StepAttribution()
        self.incarnations: list[Incarnation] = []
        self.touched: dict[str, list[Incarnation]] = {r: [] for r in run_ids}
        self.limit: str | None = None
        self.stats = FleetStats(runs=len(run_ids))
        self._ports = {r: RunPort(self, r) for r in run_ids}
        self._serving: dict[str, Incarnation] = {}
        self._lock = threading.Lock()
        self._registered = threading.Condition(self._lock)
        self._spawned = 0
        self._expired: set[str] = set()  # incarnations whose leases have been expired after their end
        self._wake = threading.Event()
        self._deadline = time.monotonic() + options.time_budget

    @classmethod
    def new(cls, session: Session, name: str, runs: int, options: RunOptions, agent: AgentSpec,
            plan: FaultPlan) -> tuple[Fleet, Evidence]:
        """A fleet of `runs` new runs named after `name` (a scenario), and the crash-free baseline of the
        agent with these options, to judge them by."""
        base = session.baseline(options, agent)
        run_ids = [session.next_run_id(name) for _ in range(runs)]
        fleet = cls(session.env, session.history, session.next_run_id(f"{name}-fleet"), run_ids, options, agent,
                    plan)
        return fleet, base

    # ---- wiring ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def attached(self) -> Iterator[Fleet]:
        """Route the runs' events here; on the way out, end every incarnation and detach."""
        for port in self._ports.values():
            self.env.attach(port)
        try:
            yield self
        finally:
            self.kill_all()
            for port in list(self._ports.values()):
                self.env.detach(port)

    def remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    # ---- incarnations ----------------------------------------------------------------------------
    def _spawn(self, role: str, run_id: str | None, argv: list[str]) -> Incarnation:
        with self._lock:
            inc_id = f"{self.name}.w{self._spawned + 1}"
            self._spawned += 1
            key = run_id or inc_id
            if key not in self._ports:  # a queue worker: its start and exit are routed by its own id
                self._ports[key] = RunPort(self, key)
                self.env.attach(self._ports[key])
        log = str(self.env.run_dir / f"{inc_id}.log")
        env = incarnation_env(self.env, inc_id, run_id, self.options, self.agent.module)
        inc = self.env.launcher.spawn(inc_id, key, role, argv, env, log)
        self.on_start(inc)  # a no-op when the launcher has already reported it
        return inc

    def on_start(self, inc: Incarnation) -> None:
        """Register a new incarnation (from the launcher as soon as its pid is known, or after spawn)."""
        with self._registered:
            if any(i is inc for i in self.incarnations):
                return
            self.incarnations.append(inc)
            self.stats.incarnations += 1
            if inc.run_id in self.touched:
                self.touched[inc.run_id].append(inc)
            self.history.append("inc.start", run_id=inc.run_id, inc=inc.inc, role=inc.role, pid=inc.pid)
            self._registered.notify_all()

    def spawn_run_worker(self, run_id: str, role: str = "worker") -> Incarnation:
        """`worker RUN_ID`: one incarnation of one run."""
        return self._spawn(role, run_id, [run_id])

    def spawn_queue_worker(self, follow: bool) -> Incarnation:
        """`worker --queue [--follow]`: takes resume jobs for any run."""
        return self._spawn("queue", None, ["--queue", "--follow"] if follow else ["--queue"])

    def live(self) -> list[Incarnation]:
        with self._lock:
            return [i for i in self.incarnations if i.alive()]

    def wait_ended(self, incs: list[Incarnation]) -> bool:
        """Wait (within the time budget) for `incs` to end; False if the budget ran out first."""
        return all(inc.ended.wait(timeout=self.remaining()) for inc in incs)

    def kill_all(self) -> None:
        kill_all(self.live())

    def drain_all(self) -> None:
        """SIGTERM every live worker (a following queue worker drains and exits 0), then wait for them."""
        live = self.live()
        for inc in live:
            inc.send(15)
        for inc in live:
            if not inc.ended.wait(timeout=self.options.grace) and not inc.exited:
                self.history.append("escalate", run_id=inc.run_id, inc=inc.inc, grace=self.options.grace)
                kill_all([inc])

    # ---- events ----------------------------------------------------------------------------------
    def _find(self, inc_id: str | None, timeout: float = 10.0) -> Incarnation | None:
        """The incarnation `inc_id`; a forked worker may report before its spawn has returned, so wait
        (up to `timeout`) for it to be registered."""
        if inc_id is None:
            return None
        with self._registered:
            self._registered.wait_for(lambda: any(i.inc == inc_id for i in self.incarnations), timeout)
            return next((i for i in self.incarnations if i.inc == inc_id), None)

    def _touch(self, run_id: str, inc: Incarnation | None) -> None:
        if inc is not None and run_id in self.touched and inc not in self.touched[run_id]:
            self.touched[run_id].append(inc)

    def _reach(self, run_id: str, step: str | None, point: str, inc_id: str | None, source: str,
               seq: int | None = None) -> Fault | None:
        with self._lock:
            nth, fault = self.plan.reach(run_id, step, point)
            where = {"seq": seq} if seq is not None else {}
            self.history.append("point", run_id=run_id, inc=inc_id, step=step, point=point, nth=nth, source=source,
                                **where)
            if fault is not None:
                self.stats.faults += 1
                self.history.append("fault", run_id=run_id, inc=inc_id, step=step, point=point,
                                    action=fault.action, nth=fault.nth)
            return fault

    def on_worker_point(self, run_id: str, msg: dict) -> bool:
        inc = self._find(msg.get("incarnation"))
        with self._lock:
            self._touch(run_id, inc)
            if inc is not None:
                self._serving[run_id] = inc
        step, point = msg.get("step"), msg.get("point", "?")
        self.steps.on_point(run_id, step, point)
        fault = self._reach(run_id, step, point, msg.get("incarnation"), "worker", msg.get("seq"))
        if fault is None:
            return True
        return self._ports[run_id].nemesis.apply(fault, inc, service_point=False).release

    def on_held_point(self, run_id: str, step: str | None, point: str, inc_id: str | None, source: str,
                      seq: int | None = None) -> bool:
        with self._lock:
            inc = next((i for i in self.incarnations if i.inc == inc_id), None) or self._serving.get(run_id)
        fault = self._reach(run_id, step, point, inc.inc if inc else inc_id, source, seq)
        if fault is None:
            return True
        return self._ports[run_id].nemesis.apply(fault, inc, service_point=False).release

    def on_service_point(self, run_id: str, point: str, info: dict) -> Decision:
        with self._lock:
            inc = self._serving.get(run_id)
            live = [i for i in self.touched.get(run_id, []) if i.alive()]
        if len(live) > 1:  # two workers on one run: the one last serving it may not be the sender
            inc = peers.sender(info.get("peer"), live) or inc
        step = self.steps.step_of(run_id, info, lambda: None)
        fault = self._reach(run_id, step, point, inc.inc if inc else None, info.get("service", "service"))
        if fault is None:
            return Decision.GO
        live = inc if inc is not None and inc.alive() else None
        return self._ports[run_id].nemesis.apply(fault, live, service_point=True).decision

    def on_note(self, run_id: str, msg: dict) -> None:
        inc = self._find(msg.get("incarnation"))
        with self._lock:
            self._touch(run_id, inc)
        fields = {k: v for k, v in msg.items() if k not in ("v", "kind", "note", "incarnation", "pid", "run_id")}
        self.history.append("note", run_id=run_id, inc=msg.get("incarnation"), note=msg.get("note"), **fields)
        if msg.get("note") == "run.done":
            self._wake.set()

    def on_exit(self, inc: Incarnation) -> None:
        self.history.append("inc.end", run_id=inc.run_id, **inc.end_fields())
        self._wake.set()

    # ---- the database side -----------------------------------------------------------------------
    def expire_ended(self) -> int:
        """Expire the leases of every incarnation of the fleet that has ended since the last call."""
        with self._lock:
            ended = [i for i in self.incarnations if not i.alive() and i.inc not in self._expired]
            self._expired.update(i.inc for i in ended)
        return self.expire_leases(ended)

    def expire_leases(self, incs: list[Incarnation]) -> int:
        """Simulate the passage of time for ended workers: their leases lapse. Returns how many."""
        owners = [i.inc for i in incs]
        if not owners:
            return 0
        with self.env.connect() as conn:
            cur = conn.execute("UPDATE leases SET expires_at = now() - interval '1 second' "
                               "WHERE owner = ANY(%s) AND expires_at > now()", (owners,))
            return cur.rowcount

    def statuses(self) -> dict[str, str | None]:
        with self.env.connect() as conn:
            rows = dict(conn.execute("SELECT run_id, status FROM checkpoints WHERE run_id = ANY(%s)",
                                     (self.run_ids,)).fetchall())
        return {r: rows.get(r) for r in self.run_ids}

    def submit(self, params: dict) -> None:
        """Create every run as an application would: its first checkpoint (seq 0) and a job to run it."""
        from killpoint.reference_agent.checkpoint import RUNNING, Checkpoint, now_iso
        from killpoint.reference_agent.queue import enqueue_resume
        from killpoint.reference_agent.step_module import load_step_module
        from killpoint.reference_agent.store import CheckpointStore

        module = load_step_module(self.agent.module)
        with self.env.connect() as conn:
            store = CheckpointStore(conn)
            for run_id in self.run_ids:
                store.save(Checkpoint(run_id=run_id, seq=0, version=module.state_version, cursor=module.start,
                                      status=RUNNING, state=module.initial_state(dict(params)), window=[],
                                      cost_usd=0.0, updated_at=now_iso()))
                enqueue_resume(conn, run_id)
        self.history.append("fleet.submit", run_id=None, runs=self.run_ids)

    def drive_queue(self, workers: int, sweep: Sweep, stale_seconds: float = 300.0,
                    cadence: float = 0.5) -> None:
        """Keep `workers` following queue workers alive until every run is done (or the time budget or the
        incarnation bound runs out: `limit`), then drain them.

        Each wake (a worker ended, a run finished, or `cadence` seconds: a sweeper runs on a timer too)
        replaces ended workers after expiring their leases, and sweeps."""
        started = time.monotonic()
        bound = 2 * workers + 2 * self.plan.most(len(self.run_ids))  # a fault ends at most one worker
        pool = [self.spawn_queue_worker(follow=True) for _ in range(workers)]
        spawned = len(pool)
        try:
            while True:
                self._wake.clear()  # whatever happens from here on wakes the wait below
                self.expire_ended()
                pool = [i for i in pool if i.alive()]
                with self.env.connect() as conn:
                    queued = sweep(conn, stale_seconds)
                if queued:
                    self.stats.sweeps_queued += len(queued)
                    self.history.append("sweep", run_id=None, queued=queued)
                statuses = self.statuses()
                if all(s in ("done", "failed") for s in statuses.values()):
                    break
                if self.remaining() <= 0:
                    self.limit = f"not done within the fleet's time budget of {self.options.time_budget:g}s"
                    break
                while len(pool) < workers:
                    if spawned >= bound:
                        self.limit = f"not done after {spawned} queue workers (bound {bound})"
                        break
                    pool.append(self.spawn_queue_worker(follow=True))
                    spawned += 1
                if self.limit:
                    break
                self._wake.wait(timeout=min(cadence, self.remaining()))
        finally:
            self.drain_all()
            self.stats.elapsed = time.monotonic() - started
            self.stats.done = sum(1 for s in self.statuses().values() if s == "done")

    # ---- evidence ----------------------------------------------------------------------------------
    def trial(self, run_id: str, schedule: Schedule, seed: int | None, checkers: Iterable[CheckerRef],
              base: Evidence, extra: dict | None = None) -> Trial:
        """Record and judge one run of the fleet (as a single-run trial is judged)."""
        return judge(self.history, run_id, schedule, seed, self.evidence(run_id, extra), base, checkers)

    def evidence(self, run_id: str, extra: dict | None = None) -> Evidence:
        """One run's evidence, with the incarnations that worked on it; any process of the fleet still
        alive counts as a leftover of every run (nothing may outlive the fleet)."""
        with self._lock:
            touched = list(self.touched[run_id])
            everyone = list(self.incarnations)
        done = self.statuses().get(run_id) == "done"
        return evidence_mod.record(self.env, self.history, run_id, touched, self.agent.own_effects_sql,
                                   limit=None if done else self.limit, watch=everyone,
                                   options={"grace": self.options.grace, **(extra or {})})
