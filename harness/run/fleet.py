"""A controller of many runs at once: queue workers, single-run workers, sweeps, faults across the fleet.

`RunController` drives one run through one worker at a time. A queue worker (`worker --queue`) serves
many runs, one after another, so its kill points belong to whichever run it is working on. `Fleet`
owns every incarnation of a group of runs:

- it attaches one small port per run (and one per queue worker, for its exit) to the `Environment`,
  so the run's worker points, service points and notes reach it, and a worker's exit too;
- a `FaultPlan` decides, for each point a run reaches, whether a fault fires there: a schedule that
  every run follows on its own (`scope="run"`: `charge:checkpoint.committed:kill` kills every run
  there once), or one schedule for the whole fleet (`scope="fleet"`: `@N` is the N-th time any run
  of the fleet reaches that step and point);
- faults are applied by the `Nemesis`, through the run's port (kill and term; `stop` needs a
  successor of its own and is refused here);
- `drive_queue` keeps N queue workers (`--queue --follow`) alive until every run is done: a worker
  that ended is replaced, the leases it held are expired (the passage of time, as for a dead worker
  in `RunController`), and the agent's own sweeper queues the runs nobody is moving;
- `evidence(run_id)` gathers one run's evidence exactly as a single-run trial does, with the
  incarnations that worked on that run.

Threads: barrier and service threads call the `on_*` methods; the launcher's reader thread calls
`on_exit` (which only records and wakes the loop); the loop that called `drive_queue` does the
database work (lease expiry, sweeps, status).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import psycopg

from killpoint.fake_services.hooks import Decision
from killpoint.checkers import Checker, run_checkers
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import unknown
from killpoint.run.controller import collect_evidence, incarnation_env
from killpoint.run.history import History
from killpoint.env.launcher import Incarnation
from killpoint.run.nemesis import HOLD, Nemesis
from killpoint.run.options import RunOptions
from killpoint.faults.points import fits
from killpoint.faults.schedule import Fault, Schedule, ScheduleError, derive_seed
from killpoint.env.stepmodule import AgentSpec
from killpoint.run.trial import Session, Trial

if TYPE_CHECKING:
    from killpoint.env.environment import Environment

FLEET_ACTIONS = ("kill", "term")
"""What a fleet fault may do to a worker (a `stop` needs a successor of its own run)."""

Sweep = Callable[[psycopg.Connection, float], list[str]]
"""A sweeper: (connection, stale seconds) -> the run ids it queued."""

Scope = Literal["run", "fleet"]


class FaultPlan:
    """Which fault, if any, fires when a run reaches a point.

    `scope="run"`: every run follows `schedule`, counting its own occurrences (as a single-run trial).
    `scope="fleet"`: the fleet follows `schedule` once, counting occurrences across every run.
    """

    def __init__(self, schedule: Schedule, scope: Scope) -> None:
        bad = [f for f in schedule if f.action not in FLEET_ACTIONS]
        if bad:
            raise ScheduleError(str(bad[0]), f"a fleet cannot apply {bad[0].action!r}",
                                f"use one of: {', '.join(FLEET_ACTIONS)}")
        self.schedule = schedule
        self.scope = scope
        self._counts: Counter = Counter()
        self._faults = {(f.step, f.point, f.nth): f for f in schedule}

    def most(self, runs: int) -> int:
        """The most faults this plan can fire over `runs` runs."""
        return len(self.schedule) * (runs if self.scope == "run" else 1)

    def reach(self, run_id: str, step: str, point: str) -> tuple[int, Fault | None]:
        """Count one arrival; return its occurrence number (in the plan's scope) and the fault, if any."""
        owner = run_id if self.scope == "run" else "*"
        self._counts[(owner, step, point)] += 1
        nth = self._counts[(owner, step, point)]
        return nth, self._faults.get((step, point, nth))  # each occurrence is counted once: it fires once


def fleet_schedule(seed: int, step_points: dict[str, list[str]], runs: int, faults: int,
                   actions: tuple[str, ...] = FLEET_ACTIONS) -> Schedule:
    """A fleet-wide schedule, a pure function of its arguments: `faults` faults, each at a step, a point
    that step reaches, an action, and an occurrence `@N` with N in 1..runs (so the faults spread over
    the fleet's runs). Collisions on (step, point, N) are skipped."""
    candidates = [(s, p, a) for s in step_points for p in step_points[s] for a in actions if fits(a, p)]
    if not candidates:
        return Schedule()
    chosen: dict[tuple[str, str, int], Fault] = {}
    for i in range(faults):
        step, point, action = candidates[derive_seed(seed, 2 * i) % len(candidates)]
        nth = 1 + derive_seed(seed, 2 * i + 1) % max(1, runs)
        chosen.setdefault((step, point, nth), Fault(step, point, action, nth))
    return Schedule(tuple(chosen.values()))


class _Port:
    """What the Environment routes to, for one run id (or one queue worker's id): the run's events go
    to the fleet. It also offers the Nemesis the few things it needs of a controller."""

    def __init__(self, fleet: Fleet, run_id: str) -> None:
        self.fleet = fleet
        self.run_id = run_id
        self.env = fleet.env
        self.history = fleet.history
        self.options = fleet.options

    def on_worker_point(self, msg: dict) -> bool:
        return self.fleet.on_worker_point(self.run_id, msg)

    def on_service_point(self, point: str, info: dict) -> Decision:
        return self.fleet.on_service_point(self.run_id, point, info)

    def on_note(self, msg: dict) -> None:
        self.fleet.on_note(self.run_id, msg)

    def on_start(self, inc: Incarnation) -> None:
        self.fleet.on_start(inc)

    def on_exit(self, inc: Incarnation) -> None:
        self.fleet.on_exit(inc)


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
        self.incarnations: list[Incarnation] = []
        self.touched: dict[str, list[Incarnation]] = {r: [] for r in run_ids}
        self.limit: str | None = None
        self.stats = FleetStats(runs=len(run_ids))
        self._ports = {r: _Port(self, r) for r in run_ids}
        self._nemeses = {r: Nemesis(port) for r, port in self._ports.items()}  # type: ignore[arg-type]
        self._serving: dict[str, Incarnation] = {}
        self._step: dict[str, str | None] = {}  # a run's step: a model request carries no key to tell
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
            self.env.attach(port)  # type: ignore[arg-type]
        try:
            yield self
        finally:
            self.kill_all()
            for port in list(self._ports.values()):
                self.env.detach(port)  # type: ignore[arg-type]

    def remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    # ---- incarnations ----------------------------------------------------------------------------
    def _spawn(self, role: str, run_id: str | None, argv: list[str]) -> Incarnation:
        with self._lock:
            inc_id = f"{self.name}.w{self._spawned + 1}"
            self._spawned += 1
            key = run_id or inc_id
            if key not in self._ports:  # a queue worker: its start and exit are routed by its own id
                self._ports[key] = _Port(self, key)
                self.env.attach(self._ports[key])  # type: ignore[arg-type]
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

    def spawn_run_worker(self, run_id: str) -> Incarnation:
        """`worker RUN_ID`: one incarnation of one run."""
        return self._spawn("worker", run_id, [run_id])

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
        live = self.live()
        for inc in live:
            inc.send(9)
            inc.send(18)  # SIGCONT: a stopped process dies only once continued
        for inc in live:
            inc.ended.wait(timeout=10)

    def drain_all(self) -> None:
        """SIGTERM every live worker (a following queue worker drains and exits 0), then wait for them."""
        live = self.live()
        for inc in live:
            inc.send(15)
        for inc in live:
            if not inc.ended.wait(timeout=self.options.grace) and not inc.exited:
                self.history.append("escalate", run_id=inc.run_id, inc=inc.inc, grace=self.options.grace)
                inc.send(9)
                inc.send(18)
                inc.ended.wait(timeout=10)

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

    def _reach(self, run_id: str, step: str | None, point: str, inc_id: str | None, source: str) -> Fault | None:
        with self._lock:
            nth, fault = self.plan.reach(run_id, step or "?", point)
            self.history.append("point", run_id=run_id, inc=inc_id, step=step, point=point, nth=nth, source=source)
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
            if msg.get("point") == "step.start":
                self._step[run_id] = msg.get("step")
        fault = self._reach(run_id, msg.get("step"), msg.get("point", "?"), msg.get("incarnation"), "worker")
        if fault is None:
            return True
        return self._nemeses[run_id].apply(fault, inc, service_point=False) != HOLD

    def on_service_point(self, run_id: str, point: str, info: dict) -> Decision:
        key = info.get("key") or ""
        with self._lock:
            inc = self._serving.get(run_id)
            # the step of the run's last step.start (queue workers report their steps); a key may name
            # something else that merely starts with the run id (a seq, a hash)
            named = key[len(run_id) + 1:].split(":")[0] if key.startswith(f"{run_id}:") else None
            step = self._step.get(run_id) or named
        fault = self._reach(run_id, step, point, inc.inc if inc else None, info.get("service", "service"))
        if fault is None:
            return Decision.GO
        live = inc if inc is not None and inc.alive() else None
        decision = self._nemeses[run_id].apply(fault, live, service_point=True)
        return Decision.GO if decision == HOLD else decision  # type: ignore[return-value]

    def on_note(self, run_id: str, msg: dict) -> None:
        inc = self._find(msg.get("incarnation"))
        with self._lock:
            self._touch(run_id, inc)
        fields = {k: v for k, v in msg.items() if k not in ("v", "kind", "note", "incarnation", "pid", "run_id")}
        self.history.append("note", run_id=run_id, inc=msg.get("incarnation"), note=msg.get("note"), **fields)
        if msg.get("note") == "run.done":
            self._wake.set()

    def on_exit(self, inc: Incarnation) -> None:
        self.history.append("inc.end", run_id=inc.run_id, inc=inc.inc, exit_code=inc.exit_code, signal=inc.signal)
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
    def trial(self, run_id: str, schedule: Schedule, seed: int | None, checkers: Iterable[str], base: Evidence,
              extra: dict | None = None, more: Iterable[Checker] = ()) -> Trial:
        """Judge one run of the fleet: the named checkers and `more` (checker functions of the caller's own;
        one that raises is `unknown`, as with the named ones)."""
        ev = self.evidence(run_id, extra)
        verdicts = run_checkers(checkers, ev, base)
        for check in more:
            try:
                verdicts.append(check(ev, base))
            except Exception as exc:  # a broken checker must not take the run down with it
                verdicts.append(unknown(getattr(check, "__name__", "checker"), f"checker raised {type(exc).__name__}: {exc}"))
        trial = Trial(run_id, schedule, seed, ev, verdicts)
        self.history.append("verdict", run_id=run_id, outcome=trial.outcome,
                            failing=[v.checker for v in trial.failing()])
        return trial

    def evidence(self, run_id: str, extra: dict | None = None) -> Evidence:
        """One run's evidence, with the incarnations that worked on it; any process of the fleet still
        alive counts as a leftover of every run (nothing may outlive the fleet)."""
        with self._lock:
            touched = list(self.touched[run_id])
            everyone = list(self.incarnations)
        done = self.statuses().get(run_id) == "done"
        return collect_evidence(self.env, self.history, run_id, touched, self.agent.own_effects_sql,
                                limit=None if done else self.limit, watch=everyone,
                                options={"grace": self.options.grace, **(extra or {})})
