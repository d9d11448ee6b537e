"""Queue workers serving many runs: the policy that drives a fleet of runs at once.

A queue worker (`worker --queue`) serves many runs, one after another, so its kill points belong to
whichever run it is working on. The events are the `Driver`'s (harness/run/driver.py), as for a single
run; what the fleet adds is when workers start:

1. `attached()` routes each run's events (and each queue worker's start and exit, under its own id) to
   the driver; one `FaultPlan` counts every run on its own (`scope="run"`) or the fleet as one
   (`scope="fleet"`: `@N` is the N-th time any run of the fleet reaches that step and point);
2. `submit` creates the runs through the adapter (a first record and a job each);
3. `drive_queue` keeps N queue workers (`--queue --follow`) alive until every run is done: a worker that
   ended is replaced, the leases it held are expired (the passage of time, as for a dead worker of a
   single run), and the agent's own sweeper queues the runs nobody is moving; then it drains them;
4. a `stop` asks for a `successor`: a `worker RUN_ID` of the frozen worker's run;
5. `evidence(run_id)` records one run's evidence as a single-run trial does, with the incarnations that
   worked on that run; `stats` sums the fleet up for the scenario's summary line;
6. invariants across runs (`checkers/invariants.py`): the quantities the agent's `INVARIANTS` declare are
   measured when the runs are submitted and once they have all ended, and every run of the fleet is judged
   by `invariants_hold` on them (with the witnesses' effects of the fleet's runs); `moved()` is how far each
   quantity moved, which `concurrent-runs` compares with the same runs done one after another;
7. `hold_together()` (before the workers start) makes the runs begin each step at once
   (run/rendezvous.py), each time a `together` event; `concurrent-runs` holds its concurrent set so.

Threads: the driver's handlers on the barrier, service and launcher threads; the loop that called
`drive_queue` does the database work (lease expiry, sweeps, status).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import psycopg

from killpoint.checkers import CheckerRef
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.invariants import FACTS, Invariant, declared, facts
from killpoint.env.environment import Environment
from killpoint.env.launcher import Incarnation
from killpoint.env.procutil import cpu_wait, cpu_wait_since
from killpoint.env.stepmodule import AgentSpec, imported
from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Schedule
from killpoint.run.driver import Driver, Route, kill_all
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.run.rendezvous import HOLD_SECONDS, Rendezvous
from killpoint.run.trial import Session, Trial, judge

Sweep = Callable[[psycopg.Connection, float], list[str]]
"""A sweeper: (connection, stale seconds) -> the run ids it queued."""


def drain(live: list[Incarnation], grace: float, history: History) -> None:
    """SIGTERM every worker of `live` not already sent one (a following queue worker drains and exits 0; one a
    `term` fault hit is draining already, and may have put its handler back as it exits: a second SIGTERM, which
    no deploy sends, would end it by the signal), then wait for each within `grace`, and SIGKILL what is left."""
    before = {inc.inc: cpu_wait(inc.pid) for inc in live}  # as the nemesis's term: a starved drain is unknown
    for inc in live:
        if not inc.termed:
            inc.send(signal.SIGTERM)
    for inc in live:
        if not inc.ended.wait(timeout=grace) and not inc.exited:
            history.append("escalate", run_id=inc.run_id, inc=inc.inc, grace=grace,
                           waited=cpu_wait_since(inc.pid, before[inc.inc]))
            kill_all([inc])


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
        self.driver = Driver(env, history, self.run_ids, plan, options, agent.module, self)
        self.limit: str | None = None
        self._routes = {r: Route(self.driver, r) for r in self.run_ids}
        self._lock = threading.Lock()
        self._spawned = 0
        self._expired: set[str] = set()  # incarnations whose leases have been expired after their end
        self._done = 0
        self._sweeps_queued = 0
        self._elapsed = 0.0
        self.invariants = agent_invariants(agent)
        self._before: dict[str, object] | None = None
        self._facts: list[dict] | None = None

    @classmethod
    def new(cls, session: Session, name: str, runs: int, options: RunOptions, agent: AgentSpec,
            plan: FaultPlan) -> tuple[Fleet, Evidence]:
        """A fleet of `runs` new runs named after `name` (a scenario), and the crash-free baseline of the
        agent with these options, to judge them by. The agent's module is imported here first: a fleet runs
        the runtime's sweeper and submits runs in this process, as the agent's own code, so whatever its
        module changes of the runtime at import applies here too (a module that patches the sweeper)."""
        imported(agent)
        base = session.baseline(options, agent)
        run_ids = [session.next_run_id(name) for _ in range(runs)]
        fleet = cls(session.env, session.history, session.next_run_id(f"{name}-fleet"), run_ids, options, agent,
                    plan)
        return fleet, base

    def hold_together(self, timeout: float = HOLD_SECONDS) -> Rendezvous:
        """Flow step 7: hold the runs at each step's start until all are there (or `timeout` has passed)."""

        def told(how: str, step: str, runs: list[str]) -> None:
            self.history.append("together", run_id=None, step=step, **{"runs" if how == "together" else "missing": runs})

        self.driver.together = Rendezvous(self.run_ids, timeout, told)
        return self.driver.together

    @contextlib.contextmanager
    def attached(self) -> Iterator[Fleet]:
        """Route the runs' events to the driver; on the way out, end every incarnation and detach."""
        for route in list(self._routes.values()):
            self.env.attach(route)
        try:
            yield self
        finally:
            if self.driver.together is not None:
                self.driver.together.close()  # a held worker's barrier thread goes on before its worker is killed
            self.kill_all()
            with self._lock:
                routes = list(self._routes.values())
            for route in routes:
                self.env.detach(route)

    @property
    def incarnations(self) -> list[Incarnation]:
        """Every incarnation of the fleet, in the order they started."""
        return self.driver.registry.all()

    @property
    def stats(self) -> FleetStats:
        """What the fleet did so far (the last `drive_queue`'s runs done and time)."""
        return FleetStats(runs=len(self.run_ids), done=self._done, faults=self.driver.fired,
                          incarnations=len(self.incarnations), sweeps_queued=self._sweeps_queued,
                          elapsed=self._elapsed)

    # ---- incarnations ----------------------------------------------------------------------------
    def _spawn(self, role: str, run_id: str | None, argv: list[str]) -> Incarnation:
        with self._lock:
            self._spawned += 1
            inc_id = f"{self.name}.w{self._spawned}"
            if run_id is None:  # a queue worker: its start and exit come under its own id
                self._routes[inc_id] = Route(self.driver, inc_id)
                self.env.attach(self._routes[inc_id])
        return self.driver.spawn(inc_id, run_id, role, argv)

    def spawn_run_worker(self, run_id: str, role: str = "worker") -> Incarnation:
        """`worker RUN_ID`: one incarnation of one run."""
        return self._spawn(role, run_id, [run_id])

    def spawn_queue_worker(self, follow: bool) -> Incarnation:
        """`worker --queue [--follow]`: takes resume jobs for any run."""
        return self._spawn("queue", None, ["--queue", "--follow"] if follow else ["--queue"])

    def successor(self, run_id: str) -> Incarnation:
        """The `Policy`'s restart: a worker of the frozen worker's run takes it over."""
        return self.spawn_run_worker(run_id, role="successor")

    def wait_ended(self, incs: list[Incarnation]) -> bool:
        """Wait (within the time budget) for `incs` to end; False if the budget ran out first."""
        return all(inc.ended.wait(timeout=self.driver.remaining()) for inc in incs)

    def kill_all(self) -> None:
        self.driver.kill_all()

    def drain_all(self) -> None:
        """The fleet's end: `drain` every live worker within the grace period."""
        drain(self.driver.registry.live(), self.options.grace, self.history)

    # ---- the database side, through the adapter --------------------------------------------------
    def expire_ended(self) -> int:
        """Expire the leases of every incarnation of the fleet that has ended since the last call."""
        with self._lock:
            ended = [i for i in self.incarnations if not i.alive() and i.inc not in self._expired]
            self._expired.update(i.inc for i in ended)
        return self.expire_leases(ended)

    def expire_leases(self, incs: list[Incarnation]) -> int:
        """Simulate the passage of time for ended workers: their leases lapse. Returns how many."""
        if not incs:
            return 0
        with self.env.pooled() as conn:
            return self.env.adapter.expire_owners(conn, [i.inc for i in incs])

    def statuses(self) -> dict[str, str | None]:
        with self.env.pooled() as conn:
            return self.env.adapter.statuses(conn, self.run_ids)

    def submit(self, params: dict) -> None:
        """Create every run as an application would (the adapter's `submit`): a first record and a job each."""
        self._before = self.measure()
        with self.env.connect() as conn:
            self.env.adapter.submit(conn, self.run_ids, self.agent.module, params)
        self.history.append("fleet.submit", run_id=None, runs=self.run_ids)

    def drive_queue(self, workers: int, sweep: Sweep, stale_seconds: float = 300.0,
                    cadence: float = 0.5) -> None:
        """Keep `workers` following queue workers alive until every run is done (or the time budget or the
        incarnation bound runs out: `limit`), then drain them.

        Each wake (a worker ended, a run finished, or `cadence` seconds: a sweeper runs on a timer too)
        replaces ended workers after expiring their leases, and sweeps."""
        started = time.monotonic()
        bound = 2 * workers + 2 * self.driver.plan.most(len(self.run_ids))  # a fault ends at most one worker
        pool = [self.spawn_queue_worker(follow=True) for _ in range(workers)]
        spawned = len(pool)
        try:
            while True:
                self.driver.changed.clear()  # whatever happens from here on wakes the wait below
                self.expire_ended()
                pool = [i for i in pool if i.alive()]
                with self.env.connect() as conn:
                    queued = sweep(conn, stale_seconds)
                if queued:
                    self._sweeps_queued += len(queued)
                    self.history.append("sweep", run_id=None, queued=queued)
                if all(s in ("done", "failed") for s in self.statuses().values()):
                    break
                if self.driver.remaining() <= 0:
                    self.limit = f"not done within the fleet's time budget of {self.options.run_limit:g}s"
                    break
                while len(pool) < workers:
                    if spawned >= bound:
                        self.limit = f"not done after {spawned} queue workers (bound {bound})"
                        break
                    pool.append(self.spawn_queue_worker(follow=True))
                    spawned += 1
                if self.limit:
                    break
                self.driver.changed.wait(timeout=min(cadence, self.driver.remaining()))
        finally:
            self.drain_all()
            self._elapsed = time.monotonic() - started
            self._done = sum(1 for s in self.statuses().values() if s == "done")

    # ---- invariants across runs -----------------------------------------------------------------------
    def measure(self) -> dict[str, object]:
        """Each declared invariant's quantity now (a number, or the error its query raised)."""
        out: dict[str, object] = {}
        if not self.invariants:
            return out
        with self.env.pooled() as conn:
            for inv in self.invariants:
                try:
                    row = conn.execute(inv.sql).fetchone()
                    value = None if row is None else row[0]
                    out[inv.name] = value if value is None or isinstance(value, (int, float)) else float(value)
                except psycopg.Error as exc:
                    conn.rollback()
                    out[inv.name] = f"error: {str(exc).strip()}"
        return out

    def invariant_facts(self) -> list[dict]:
        """The facts of every invariant over the fleet's runs (measured once, after they all ended)."""
        if self._facts is None:
            effects = [e for r in self.run_ids for e in self.env.services.effects(r)]
            self._facts = facts(self.invariants, self._before or {}, self.measure(), effects, self.run_ids)
        return self._facts

    def moved(self) -> dict[str, object]:
        """How far each quantity moved over the fleet (after - before), or what was measured when not a number."""
        out: dict[str, object] = {}
        for f in self.invariant_facts():
            before, after = f["before"], f["after"]
            numbers = all(isinstance(v, (int, float)) for v in (before, after))
            out[f["name"]] = after - before if numbers else f"{before!r} -> {after!r}"
        return out

    # ---- evidence ----------------------------------------------------------------------------------
    def trial(self, run_id: str, schedule: Schedule, seed: int | None, checkers: Iterable[CheckerRef],
              base: Evidence, extra: dict | None = None) -> Trial:
        """Record and judge one run of the fleet (as a single-run trial is judged); with declared
        invariants, by `invariants_hold` too, on the fleet's facts."""
        checkers = list(checkers)
        if self.invariants:
            extra = {**(extra or {}), FACTS: [*self.invariant_facts(), *(extra or {}).get(FACTS, [])]}
            checkers += [c for c in ("invariants_hold",) if c not in checkers]
        if extra and "serial" in extra:
            checkers += [c for c in ("same_as_serial",) if c not in checkers]
        return judge(self.history, run_id, schedule, seed, self.evidence(run_id, extra), base, checkers)

    def evidence(self, run_id: str, extra: dict | None = None) -> Evidence:
        """One run's evidence, with the incarnations that worked on it; any process of the fleet still
        alive counts as a leftover of every run (nothing may outlive the fleet)."""
        done = self.statuses().get(run_id) == "done"
        return self.driver.evidence(run_id, self.agent.own_effects_sql, None if done else self.limit, extra,
                                    watch=self.incarnations)


def agent_invariants(agent: AgentSpec) -> tuple[Invariant, ...]:
    """The invariants the agent's step module declares (`INVARIANTS`; none for a black-box worker)."""
    if not agent.has_invariants:  # its probe saw none: no import here to look
        return ()
    try:
        module = imported(agent)
    except Exception:  # noqa: BLE001 - a module the harness cannot import here declares nothing it can measure
        return ()
    return declared(getattr(module, "INVARIANTS", None), agent.module)
