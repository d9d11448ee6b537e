"""The run driver: the events of a group of runs (one run, or a fleet's), handled in one place.

What differs between driving one run and driving a fleet is a `Policy`: when incarnations start and when
the runs are over (`RunController`: one worker per run, restarted until it is done; `Fleet`: queue
workers serving many runs). Whatever the policy, the environment's reports go the same way:

1. `inc.start`: an incarnation is registered and recorded as soon as its pid is known (`Registry`); a
   worker's reports wait until it is, so they follow its `inc.start`.
2. A kill point (a worker's report, a commit the SQL barrier holds, a held service request) is counted by
   the `FaultPlan` and recorded, `point` and, where one fires, `fault`, under one lock.
3. The incarnation of a point: the reporting worker (which then owns the run); for a held commit, the
   session's incarnation or the run's owner; for a service request, its sender (env/peers.py) when two
   of the run's workers are alive, else the run's owner.
4. The step of a service request: `StepAttribution`, with the run's cursor read through the adapter.
5. A worker's `step.start` with no fault waits at the driver's `together` rendezvous, if it has one
   (run/rendezvous.py: a fleet's runs begin each step at once).
6. A fired fault goes to the run's `Nemesis`, whose `RunTarget` reaches the database, the run's lease
   (through the adapter), the time budget and the policy's `successor`, never these handlers.
7. Notes are recorded; `inc.end` once the worker's last notes are (the barrier settles); a run's
   `run.done` note and every end set `changed` (a policy's loop waits on it).

Threads: barrier and service threads call the `on_*point` methods and are held while they run (that is
the barrier); the launcher's reader thread calls `on_start`/`on_exit`; the policy's loop does the rest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import psycopg

from killpoint.checkers.evidence import Evidence
from killpoint.env.environment import Environment
from killpoint.env.launcher import Incarnation
from killpoint.env.postgres.handle import PostgresHandle
from killpoint.env.worker_clock import clock_env
from killpoint.env.worker_clock import unsupported as clock_unsupported
from killpoint.env.worker_env import incarnation_env
from killpoint.fake_services.hooks import Decision
from killpoint.faults.outage import Outages
from killpoint.faults.plan import FaultPlan
from killpoint.faults.points import base
from killpoint.faults.schedule import Fault
from killpoint.run import evidence as evidence_mod
from killpoint.run.attribution import StepAttribution
from killpoint.run.history import History
from killpoint.run.nemesis import Nemesis
from killpoint.run.options import RunOptions
from killpoint.run.registry import Registry
from killpoint.run.rendezvous import Rendezvous

NOTE_HEADER = ("v", "kind", "note", "incarnation", "pid", "run_id")
"""A note's fields that the `note` event names otherwise (or not at all)."""


class Policy(Protocol):
    """What the driver asks of whoever decides when incarnations start (one worker per run, or queue
    workers): the one restart a fault makes, outside that policy's own loop."""

    def successor(self, run_id: str) -> Incarnation:
        """Start the incarnation that takes `run_id` over from a frozen one (the nemesis's `stop`)."""
        ...


@dataclass(frozen=True)
class RunTarget:
    """The nemesis's `Target` for one run: the database, the run's lease, the time budget (`time_left`),
    and the policy's `successor`. Nothing of it leads back into the driver's event handling."""

    env: Environment
    history: History
    options: RunOptions
    run_id: str
    successor: Callable[[], Incarnation]
    time_left: Callable[[], float]
    clock: Callable[[float], str | None] = lambda seconds: "no clock to move"

    @property
    def pg(self) -> PostgresHandle:
        return self.env.pg

    @property
    def barrier_key(self) -> int | None:
        return self.env.barrier_key(self.run_id)

    def connect(self) -> psycopg.Connection:
        return self.env.connect()

    def expire_lease(self) -> None:
        """Simulate the passage of time for a dead or frozen lease holder."""
        with self.env.pooled() as conn:
            self.env.adapter.expire(conn, self.run_id)  # the seeds' leases, or the framework's own claim

    def spawn_successor(self) -> Incarnation:
        return self.successor()

    def remaining(self) -> float:
        return self.time_left()

    def shift_clock(self, seconds: float) -> str | None:
        return self.clock(seconds)


class Route:
    """The `RunListener` of one run id (or a queue worker's own id, for its start and exit): the
    environment's reports of it, handed to the driver with the id they came under."""

    def __init__(self, driver: Driver, run_id: str) -> None:
        self.driver = driver
        self.run_id = run_id

    @property
    def incarnations(self) -> list[Incarnation]:
        return self.driver.registry.of_run(self.run_id)

    def on_start(self, inc: Incarnation) -> None:
        self.driver.on_start(inc)

    def on_exit(self, inc: Incarnation) -> None:
        self.driver.on_exit(inc)

    def on_worker_point(self, msg: dict) -> bool:
        return self.driver.on_worker_point(self.run_id, msg)

    def on_held_point(self, step: str | None, point: str, inc_id: str | None, source: str,
                      seq: int | None = None) -> bool:
        return self.driver.on_held_point(self.run_id, step, point, inc_id, source, seq)

    def on_service_point(self, point: str, info: dict) -> Decision:
        return self.driver.on_service_point(self.run_id, point, info)

    def on_note(self, msg: dict) -> None:
        self.driver.on_note(self.run_id, msg)


class Driver:
    """The incarnations, kill points, faults and evidence of `run_ids`, under `plan` (see the module
    docstring); `policy` starts the successors a `stop` asks for. `fired` counts the faults that fired."""

    def __init__(self, env: Environment, history: History, run_ids: list[str], plan: FaultPlan,
                 options: RunOptions, steps_module: str, policy: Policy) -> None:
        self.env = env
        self.history = history
        self.plan = plan
        self.options = options
        self.steps_module = steps_module
        self.policy = policy
        self.registry = Registry(run_ids)
        self.steps = StepAttribution()
        self.fired = 0
        self.changed = threading.Event()
        self._lock = threading.Lock()
        self._nemeses: dict[str, Nemesis] = {}
        self.outages = Outages()
        self.clock: dict[str, float] = {}
        """Each run's clock shift in seconds (its `clock` faults so far): its later incarnations' wall clock."""
        self._deadline = time.monotonic() + options.run_limit
        self.together: Rendezvous | None = None
        """Holds the runs at each step's start until all are there (a fleet's concurrent set), or None."""

    def remaining(self) -> float:
        """Seconds left of the time budget (`options.run_limit`, from the driver's creation on)."""
        return max(0.0, self._deadline - time.monotonic())

    # ---- incarnations ----------------------------------------------------------------------------
    def spawn(self, inc_id: str, run_id: str | None, role: str, argv: list[str]) -> Incarnation:
        """Start incarnation `inc_id` of `run_id` (None: a queue worker, whose reports of its start and exit
        come under its own id) with `argv`; its log is the run folder's `<inc_id>.log`."""
        log = str(self.env.run_dir / f"{inc_id.replace('#', '-')}.log")
        env = incarnation_env(self.env, inc_id, run_id, self.options, self.steps_module)
        env.update(clock_env(self.clock.get(run_id or "", 0.0), self.env.black_box, env.get("LD_PRELOAD")))
        inc = self.env.launcher.spawn(inc_id, run_id or inc_id, role, argv, env, log)
        self.on_start(inc)  # a no-op when the launcher has already reported it
        return inc

    def on_start(self, inc: Incarnation) -> None:
        self.registry.register(inc, self._record_start)  # recorded before any report of it is handled

    def _record_start(self, inc: Incarnation) -> None:
        self.history.append("inc.start", run_id=inc.run_id, inc=inc.inc, role=inc.role, pid=inc.pid)
        with self._lock:
            self.outages.resumed(inc.run_id)  # an `outage` lasts until the run is resumed

    def on_exit(self, inc: Incarnation) -> None:
        self.env.barrier.settle(inc.pid)  # its last notes (run.done...) go in the journal before its end
        self.history.append("inc.end", run_id=inc.run_id, **inc.end_fields())
        self.changed.set()

    def kill_all(self) -> None:
        kill_all(self.registry.live())

    # ---- kill points -----------------------------------------------------------------------------
    def _reach(self, run_id: str, step: str | None, point: str, inc_id: str | None, source: str,
               seq: int | None = None) -> Fault | None:
        with self._lock:
            nth, fault = self.plan.reach(run_id, step, point)
            where = {"seq": seq} if seq is not None else {}  # a worker's report names its checkpoint seq
            self.history.append("point", run_id=run_id, inc=inc_id, step=step, point=point, nth=nth,
                                source=source, **where)
            if fault is not None:
                self.fired += 1
                self.history.append("fault", run_id=run_id, inc=inc_id, step=step, point=point,
                                    action=fault.action, nth=fault.nth)
            return fault

    def _nemesis(self, run_id: str) -> Nemesis:
        with self._lock:
            if run_id not in self._nemeses:
                target = RunTarget(self.env, self.history, self.options, run_id,
                                   lambda: self.policy.successor(run_id), self.remaining,
                                   lambda seconds: self._shift_clock(run_id, seconds))
                self._nemeses[run_id] = Nemesis(target)
            return self._nemeses[run_id]

    def _shift_clock(self, run_id: str, seconds: float) -> str | None:
        """Move the wall clock of `run_id`'s later incarnations by `seconds`; why it cannot, if it cannot."""
        reason = clock_unsupported(self.env.black_box)
        if reason is None:
            with self._lock:
                self.clock[run_id] = self.clock.get(run_id, 0.0) + seconds
        return reason

    def on_worker_point(self, run_id: str, msg: dict) -> bool:
        """A white-box worker reports a point; True releases it."""
        inc_id, step, point = msg.get("incarnation"), msg.get("step"), msg.get("point", "?")
        inc = self.registry.find(inc_id)  # waits until its inc.start is recorded
        self.registry.serve(run_id, inc)
        self.steps.on_point(run_id, step, point, inc_id)
        fault = self._reach(run_id, step, point, inc_id, "worker", msg.get("seq"))
        if fault is not None:
            return self._nemesis(run_id).apply(fault, inc, service_point=False).release
        if self.together is not None and point == "step.start" and step:
            self.together.arrive(run_id, step)
        return True

    def on_held_point(self, run_id: str, step: str | None, point: str, inc_id: str | None, source: str,
                      seq: int | None = None) -> bool:
        """A worker is held at a point from outside (a black-box worker's checkpoint, env/sqlbarrier.py);
        `inc_id` is its session's application name, if it names an incarnation. True releases it."""
        inc = self.registry.named(inc_id) or self.registry.owner(run_id)
        fault = self._reach(run_id, step, point, inc.inc if inc else inc_id, source, seq)
        return True if fault is None else self._nemesis(run_id).apply(fault, inc, service_point=False).release

    def on_service_point(self, run_id: str, point: str, info: dict) -> Decision:
        """A fake service holds a request of `run_id` at `point`; the decision releases it."""
        inc = self.registry.sender(run_id, info) or self.registry.owner(run_id)
        inc_id = inc.inc if inc else None
        step = self.steps.step_of(run_id, info, lambda: self.cursor(run_id), inc_id)
        service = str(info.get("service", "service"))
        fault = self._reach(run_id, step, point, inc_id, service)
        if fault is not None and base(fault.action) == "outage":
            with self._lock:
                self.outages.start(run_id, service, fault.action)
            return Decision.ERROR
        if fault is None:
            with self._lock:
                failing = self.outages.take(run_id, service)  # an outage in force fails every request
            return Decision.ERROR if failing else Decision.GO
        return self._nemesis(run_id).apply(fault, inc, service_point=True).decision

    def cursor(self, run_id: str) -> str | None:
        """The cursor of the run's last committed checkpoint (None if there is none or it cannot be read)."""
        try:
            with self.env.pooled() as conn:
                return self.env.adapter.cursor(conn, run_id)  # where the worker's runtime keeps it
        except psycopg.Error:
            return None

    def on_note(self, run_id: str, msg: dict) -> None:
        inc = self.registry.find(msg.get("incarnation"))  # a worker's first note may come before its spawn returned
        self.registry.touch(run_id, inc)
        fields = {k: v for k, v in msg.items() if k not in NOTE_HEADER}
        self.history.append("note", run_id=run_id, inc=msg.get("incarnation"), note=msg.get("note"), **fields)
        if msg.get("note") == "run.done":
            self.changed.set()

    # ---- evidence ---------------------------------------------------------------------------------
    def evidence(self, run_id: str, own_effects_sql: str | None, limit: str | None, extra: dict | None = None,
                 also: list[Incarnation] | None = None, watch: list[Incarnation] | None = None) -> Evidence:
        """Record `run_id`'s evidence in the history and return it: its incarnations (after `also`, those of
        the same run id driven earlier), `limit` (a liveness bound it hit, or None), the options the
        checkers read; a process of `watch` (default: the run's incarnations) still alive is a leftover."""
        return evidence_mod.record(self.env, self.history, run_id, [*(also or []), *self.registry.of_run(run_id)],
                                   own_effects_sql, limit=limit, watch=watch,
                                   options={**evidence_mod.recorded_options(self.options),
                                            **(extra or {})})


def kill_all(live: list[Incarnation]) -> None:
    """SIGKILL every incarnation of `live` (SIGCONT too: a stopped process dies only once continued) and
    wait for their ends to be recorded."""
    for inc in live:
        inc.send(9)
        inc.send(18)
    for inc in live:
        inc.ended.wait(timeout=10)
