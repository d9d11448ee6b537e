"""The interpreter of one run: starts incarnations until the run is done, holds each at its kill points,
fires the schedule's faults there, and records the evidence afterwards.

1. `run()` starts an incarnation, waits for every live one to end, and starts the next (after expiring
   the lease a dead worker held) until the run is done, refused, or a bound is hit (a liveness limit).
2. The environment routes the run's events here (`RunListener`): each kill point is counted by the
   `FaultPlan`; where a fault fires, the `Nemesis` applies it while the worker (or the request) is held.
3. The step of a service request comes from `StepAttribution` (the same rule as a fleet's).
4. `evidence()` records what the run left into the history and returns it for the checkers.

Threads: the run's own loop (`run`), one barrier thread per worker connection and one per held service
request call the `on_*` methods; counting and fault selection happen under a lock, the fault itself
outside it (a `stop` runs a whole successor incarnation while the zombie waits).
"""

from __future__ import annotations

import threading
import time

import psycopg

from killpoint.checkers.evidence import Evidence
from killpoint.env import peers
from killpoint.env.environment import Environment
from killpoint.env.launcher import Incarnation
from killpoint.env.postgres.handle import PostgresHandle
from killpoint.env.worker_env import incarnation_env
from killpoint.fake_services.hooks import Decision
from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Fault, Schedule
from killpoint.run import evidence as evidence_mod
from killpoint.run import hang
from killpoint.run.attribution import StepAttribution
from killpoint.run.history import History
from killpoint.run.nemesis import Nemesis
from killpoint.run.options import RunOptions

REFUSED_EXIT = 3


class RunController:
    """Drives one run (one run id) through one schedule. A `RunListener` and a nemesis `Target`."""

    def __init__(self, env: Environment, history: History, run_id: str, schedule: Schedule,
                 options: RunOptions, steps_module: str, argv: list[str] | None = None) -> None:
        self.env = env
        self.history = history
        self.run_id = run_id
        self.schedule = schedule
        self.options = options
        self.steps_module = steps_module
        self.argv = argv if argv is not None else [run_id]
        self.incarnations: list[Incarnation] = []
        self.limit: str | None = None
        self.plan = FaultPlan(schedule, "run")
        self.steps = StepAttribution()
        self._lock = threading.Lock()
        self._registered = threading.Condition(self._lock)
        self._current: Incarnation | None = None
        self._nemesis = Nemesis(self)
        self._earlier = len(history.of_run(run_id, "inc.start"))
        """Incarnations of this run id started by earlier controllers (a run paused under one agent and
        resumed under another): numbering goes on after them, so an incarnation id names one process."""
        self._deadline = time.monotonic() + options.time_budget

    # ---- what the nemesis may act on --------------------------------------------------------------
    @property
    def pg(self) -> PostgresHandle:
        return self.env.pg

    def connect(self) -> psycopg.Connection:
        return self.env.connect()

    def remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def expire_lease(self) -> None:
        """Simulate the passage of time for a dead or frozen lease holder."""
        with self.env.pooled() as conn:
            self.env.adapter.expire(conn, self.run_id)  # the seeds' leases, or the framework's own claim

    def spawn_successor(self) -> Incarnation:
        return self.spawn("successor")

    # ---- processes -------------------------------------------------------------------------------
    def worker_env(self, inc: str) -> dict[str, str]:
        """The environment of one incarnation (docs/contracts.md section 2)."""
        return incarnation_env(self.env, inc, self.run_id, self.options, self.steps_module)

    def spawn(self, role: str) -> Incarnation:
        with self._lock:
            inc_id = f"{self.run_id}#{self._earlier + len(self.incarnations) + 1}"
        log = str(self.env.run_dir / f"{inc_id.replace('#', '-')}.log")
        inc = self.env.launcher.spawn(inc_id, self.run_id, role, self.argv, self.worker_env(inc_id), log)
        self.on_start(inc)  # a no-op when the launcher has already reported it
        return inc

    def on_start(self, inc: Incarnation) -> None:
        """Register a new incarnation and record `inc.start` (from the launcher, as soon as its pid is
        known: before its end can be reported, and before its reports are handled, see `_find`)."""
        with self._registered:
            if any(i is inc for i in self.incarnations):
                return
            self.incarnations.append(inc)
            self._current = inc
            self.history.append("inc.start", run_id=self.run_id, inc=inc.inc, role=inc.role, pid=inc.pid)
            self._registered.notify_all()

    def on_exit(self, inc: Incarnation) -> None:
        self.env.barrier.settle(inc.pid)  # its last notes (run.done...) go in the journal before its end
        self.history.append("inc.end", run_id=self.run_id, **inc.end_fields())

    def _owner(self) -> Incarnation | None:
        """The incarnation a service request of this run most likely comes from."""
        with self._lock:
            cur = self._current
            if cur is not None and cur.alive() and not cur.stopped.is_set():
                return cur
            for inc in reversed(self.incarnations):
                if inc.alive() and not inc.stopped.is_set():
                    return inc
            # A request came, so its sender runs: a worker just thawed whose SIGCONT the launcher has not
            # seen yet still looks stopped.
            return next((inc for inc in reversed(self.incarnations) if inc.alive()), None)

    def _sender(self, info: dict) -> Incarnation | None:
        """The incarnation that sent a service request, found by its client socket (env/peers.py), when
        more than one worker of the run is alive (a thawed zombie and its successor): then `_owner`, the
        last to report a point, may be the other one. None when one or none is alive (`_owner` is right)."""
        with self._lock:
            live = [i for i in self.incarnations if i.alive()]  # a just-thawed one may still look stopped
        return peers.sender(info.get("peer"), live) if len(live) > 1 else None

    def _find(self, inc_id: str | None, timeout: float = 10.0) -> Incarnation | None:
        """The incarnation `inc_id`. A forked worker may report before the launcher has told us its pid:
        wait (up to `timeout`) for it to be registered, so its reports follow its `inc.start`."""
        if inc_id is None:
            return None
        with self._registered:
            self._registered.wait_for(lambda: any(i.inc == inc_id for i in self.incarnations), timeout)
            return next((i for i in self.incarnations if i.inc == inc_id), None)

    # ---- kill points -----------------------------------------------------------------------------
    def _reach(self, step: str | None, point: str, inc_id: str | None, source: str,
               seq: int | None = None) -> Fault | None:
        with self._lock:
            nth, fault = self.plan.reach(self.run_id, step, point)
            where = {"seq": seq} if seq is not None else {}  # a worker's report names its checkpoint seq
            self.history.append("point", run_id=self.run_id, inc=inc_id, step=step, point=point, nth=nth,
                                source=source, **where)
            if fault is not None:
                self.history.append("fault", run_id=self.run_id, inc=inc_id, step=step, point=point,
                                    action=fault.action, nth=fault.nth)
            return fault

    def on_worker_point(self, msg: dict) -> bool:
        """A white-box worker reports a point; True releases it."""
        inc_id, step, point = msg.get("incarnation"), msg.get("step"), msg.get("point", "?")
        inc = self._find(inc_id)  # waits until its inc.start is recorded
        if inc is not None:
            with self._lock:
                self._current = inc
        self.steps.on_point(self.run_id, step, point, inc_id)
        fault = self._reach(step, point, inc_id, "worker", msg.get("seq"))
        return True if fault is None else self._nemesis.apply(fault, inc, service_point=False).release

    def on_held_point(self, step: str | None, point: str, inc_id: str | None, source: str,
                      seq: int | None = None) -> bool:
        """A worker is held at a point from outside (a black-box worker's checkpoint, env/sqlbarrier.py);
        `inc_id` is its session's application name, if it names an incarnation. True releases it."""
        with self._lock:
            inc = next((i for i in self.incarnations if i.inc == inc_id), None)
        inc = inc or self._owner()
        fault = self._reach(step, point, inc.inc if inc else inc_id, source, seq)
        return True if fault is None else self._nemesis.apply(fault, inc, service_point=False).release

    def on_service_point(self, point: str, info: dict) -> Decision:
        """A fake service holds a request of this run at `point`; the decision releases it."""
        inc = self._sender(info) or self._owner()
        step = self.steps.step_of(self.run_id, info, self._cursor, inc.inc if inc else None)
        fault = self._reach(step, point, inc.inc if inc else None, info.get("service", "service"))
        return Decision.GO if fault is None else self._nemesis.apply(fault, inc, service_point=True).decision

    def _cursor(self) -> str | None:
        """The cursor of the run's last committed checkpoint (None if there is none or it cannot be read)."""
        try:
            with self.env.pooled() as conn:
                return self.env.adapter.cursor(conn, self.run_id)  # where the worker's runtime keeps it
        except psycopg.Error:
            return None

    def on_note(self, msg: dict) -> None:
        self._find(msg.get("incarnation"))  # a worker's first note may arrive before its spawn returned
        fields = {k: v for k, v in msg.items() if k not in ("v", "kind", "note", "incarnation", "pid", "run_id")}
        self.history.append("note", run_id=self.run_id, inc=msg.get("incarnation"), note=msg.get("note"), **fields)

    # ---- the loop -------------------------------------------------------------------------------
    def status(self) -> str | None:
        """The run's status in its runtime's records (the environment's adapter): done, running... or None."""
        with self.env.pooled() as conn:
            return self.env.adapter.status(conn, self.run_id)

    def finished(self, first: Incarnation, status: str | None) -> bool:
        """The run is over: its records say done (`status`, read once the incarnations ended), or a
        black-box worker exited 0 and its records do not say otherwise (nothing recorded, or done). A
        white-box worker's exit 0 after a drain is not done."""
        if status == "done":
            return True
        return self.env.black_box and first.exit_code == 0 and status is None

    def run(self) -> None:
        """Start incarnations until the run is done, refused, failed (its records say status `failed`: the
        agent gave up on it, `completes` reports why), or a bound is hit (a liveness failure)."""
        self.history.append("run.begin", run_id=self.run_id, schedule=str(self.schedule), steps=self.steps_module)
        bound = self.options.incarnation_bound(len(self.schedule))
        try:
            while True:
                if len(self.incarnations) >= bound:
                    self.limit = f"not done after {len(self.incarnations)} incarnations (bound {bound})"
                    break
                first = self.spawn("worker")
                if not self._wait_all():
                    self.limit = f"not done within the time budget of {self.options.time_budget:g}s"
                    self.limit = hang.report(self.history, self.run_id, self.incarnations, self.limit) or self.limit
                    break
                self.env.settle(self.run_id)  # a dead worker's held commit lands (or not) before anyone reads
                refused = first.exit_code == REFUSED_EXIT and self.options.exit_codes == "killpoint"
                status = None if refused else self.status()
                if refused or self.finished(first, status):
                    break
                if status == "failed":  # the agent gave up on the run: a restart would only repeat it
                    break
                self.expire_lease()
        finally:
            self.kill_all()
            unfired = sorted(str(f) for f in self.plan.unfired(self.run_id))
            self.history.append("run.end", run_id=self.run_id, limit=self.limit, unfired=unfired)

    def _wait_all(self) -> bool:
        while True:
            with self._lock:
                live = [i for i in self.incarnations if i.alive()]
            if not live:
                return True
            for inc in live:
                if not inc.ended.wait(timeout=self.remaining()):
                    return False

    def kill_all(self) -> None:
        with self._lock:
            live = [i for i in self.incarnations if i.alive()]
        kill_all(live)

    # ---- evidence ---------------------------------------------------------------------------------
    def evidence(self, own_effects_sql: str | None, extra: dict | None = None,
                 also: list[Incarnation] | None = None) -> Evidence:
        """Record the run's evidence in the history and return it; `also`: incarnations of the same run id
        driven by an earlier controller (a run resumed under other code)."""
        return evidence_mod.record(self.env, self.history, self.run_id, [*(also or []), *self.incarnations],
                                   own_effects_sql, limit=self.limit,
                                   options={"grace": self.options.grace, "exit_codes": self.options.exit_codes,
                                            **(extra or {})})


def kill_all(live: list[Incarnation]) -> None:
    """SIGKILL every incarnation of `live` (SIGCONT too: a stopped process dies only once continued) and
    wait for their ends to be recorded."""
    for inc in live:
        inc.send(9)
        inc.send(18)
    for inc in live:
        inc.ended.wait(timeout=10)
