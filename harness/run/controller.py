"""The interpreter of one run: starts incarnations until the run is done, holds each at its kill
points, fires the schedule's faults there, and gathers the evidence afterwards.

Threads: the run's own loop (`run`), one barrier thread per worker connection and one per held service
request call `on_worker_point` / `on_service_point`; counting and fault selection happen under a lock,
the fault itself outside it (a `stop` runs a whole successor incarnation while the zombie waits).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

import psutil
import psycopg

from killpoint.fake_services.hooks import Decision
from killpoint.env import audit
from killpoint.checkers.evidence import Evidence
from killpoint.run.history import History
from killpoint.env.launcher import Incarnation
from killpoint.run.nemesis import HOLD, Nemesis
from killpoint.run.options import RunOptions
from killpoint.faults.schedule import Fault, Schedule

if TYPE_CHECKING:
    from killpoint.env.environment import Environment

REFUSED_EXIT = 3


class RunController:
    """Drives one run (one run id) through one schedule."""

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
        self._pending: dict[tuple[str, str, int], Fault] = {(f.step, f.point, f.nth): f for f in schedule}
        self._counts: Counter = Counter()
        self._lock = threading.Lock()
        self._registered = threading.Condition(self._lock)
        self._current: Incarnation | None = None
        self._step: str | None = None
        self._reported: set[str] = set()  # steps a white-box worker reported at step.start
        self._nemesis = Nemesis(self)
        self._earlier = sum(1 for e in history.events("inc.start") if e.get("run_id") == run_id)
        """Incarnations of this run id started by earlier controllers (a run paused under one agent and
        resumed under another): numbering goes on after them, so an incarnation id names one process."""
        self._deadline = time.monotonic() + options.time_budget

    # ---- time and processes ------------------------------------------------------------------
    def remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

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
        self.history.append("inc.end", run_id=self.run_id, inc=inc.inc, exit_code=inc.exit_code, signal=inc.signal)

    def expire_lease(self) -> None:
        """Simulate the passage of time for a dead or frozen lease holder."""
        with self.env.connect() as conn:
            conn.execute("UPDATE leases SET expires_at = now() - interval '1 second' WHERE run_id = %s",
                         (self.run_id,))

    def _owner(self) -> Incarnation | None:
        """The incarnation a service request of this run most likely comes from."""
        with self._lock:
            cur = self._current
            if cur is not None and cur.alive() and not cur.stopped.is_set():
                return cur
            for inc in reversed(self.incarnations):
                if inc.alive() and not inc.stopped.is_set():
                    return inc
        return None

    # ---- kill points -----------------------------------------------------------------------------
    def _reach(self, step: str | None, point: str, inc: str | None, source: str,
               seq: int | None = None) -> Fault | None:
        with self._lock:
            key = (step or "?", point)
            self._counts[key] += 1
            nth = self._counts[key]
            where = {"seq": seq} if seq is not None else {}  # a worker's report names its checkpoint seq
            self.history.append("point", run_id=self.run_id, inc=inc, step=step, point=point, nth=nth, source=source,
                                **where)
            return self._pending.pop((step or "?", point, nth), None)

    def on_worker_point(self, msg: dict) -> bool:
        """A white-box worker reports a point; True releases it."""
        inc_id, step, point = msg.get("incarnation"), msg.get("step"), msg.get("point", "?")
        inc = self._find(inc_id)  # waits until its inc.start is recorded
        if inc is not None:
            with self._lock:
                self._current = inc
        if point == "step.start":
            self._step = step
            self._reported.add(step)
        return self._hold(step, point, inc, inc_id, "worker", msg.get("seq"))

    def on_held_point(self, step: str | None, point: str, inc_id: str | None, source: str,
                      seq: int | None = None) -> bool:
        """A worker is held at a point from outside (a black-box worker's checkpoint, harness/sqlbarrier.py);
        `inc_id` is its session's application name, if it names an incarnation. True releases it."""
        with self._lock:
            inc = next((i for i in self.incarnations if i.inc == inc_id), None)
        inc = inc or self._owner()
        return self._hold(step, point, inc, inc.inc if inc else inc_id, source, seq)

    def _hold(self, step: str | None, point: str, inc: Incarnation | None, inc_id: str | None, source: str,
              seq: int | None) -> bool:
        fault = self._reach(step, point, inc_id, source, seq)
        if fault is None:
            return True
        self.history.append("fault", run_id=self.run_id, inc=inc_id, step=step, point=point,
                            action=fault.action, nth=fault.nth)
        return self._nemesis.apply(fault, inc, service_point=False) != HOLD

    def on_service_point(self, point: str, info: dict) -> Decision:
        """A fake service holds a request of this run at `point`; the decision releases it."""
        key = info.get("key") or ""
        prefix = f"{self.run_id}:"
        named = key[len(prefix):].split(":")[0] if key.startswith(prefix) else None
        if self._reported:
            # A key names its step only if it is one: a worker that reports its steps may key on anything
            # else (a seq, a hash) that merely starts with the run id.
            step = named if named in self._reported else self._step
        else:
            # A black-box worker: the step in progress is the cursor of its last checkpoint.
            step = self._cursor() or named
        inc = self._owner()
        inc_id = inc.inc if inc else None
        fault = self._reach(step, point, inc_id, info.get("service", "service"))
        if fault is None:
            return Decision.GO
        self.history.append("fault", run_id=self.run_id, inc=inc_id, step=step, point=point,
                            action=fault.action, nth=fault.nth)
        decision = self._nemesis.apply(fault, inc, service_point=True)
        return Decision.GO if decision == HOLD else decision  # type: ignore[return-value]

    def _cursor(self) -> str | None:
        """The cursor of the run's last committed checkpoint (None if there is none or it cannot be read)."""
        try:
            with self.env.connect() as conn:
                row = conn.execute("SELECT data->>'cursor' FROM checkpoints WHERE run_id = %s",
                                   (self.run_id,)).fetchone()
        except psycopg.Error:
            return None
        return row[0] if row else None

    def on_note(self, msg: dict) -> None:
        self._find(msg.get("incarnation"))  # a worker's first note may arrive before its spawn returned
        fields = {k: v for k, v in msg.items() if k not in ("v", "kind", "note", "incarnation", "pid", "run_id")}
        self.history.append("note", run_id=self.run_id, inc=msg.get("incarnation"), note=msg.get("note"), **fields)

    def _find(self, inc_id: str | None, timeout: float = 10.0) -> Incarnation | None:
        """The incarnation `inc_id`. A forked worker may report before the launcher has told us its pid:
        wait (up to `timeout`) for it to be registered, so its reports follow its `inc.start`."""
        if inc_id is None:
            return None
        with self._registered:
            self._registered.wait_for(lambda: any(i.inc == inc_id for i in self.incarnations), timeout)
            return next((i for i in self.incarnations if i.inc == inc_id), None)

    # ---- the loop -------------------------------------------------------------------------------
    def status(self) -> str | None:
        with self.env.connect() as conn:
            row = conn.execute("SELECT status FROM checkpoints WHERE run_id = %s", (self.run_id,)).fetchone()
        return row[0] if row else None

    def run(self) -> None:
        """Start incarnations until the run is done, refused, or a bound is hit (a liveness failure)."""
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
                    break
                if first.exit_code == REFUSED_EXIT or self.status() == "done":
                    break
                self.expire_lease()
        finally:
            self.kill_all()
            unfired = sorted(str(f) for f in self._pending.values())
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
        for inc in live:
            inc.send(9)
            inc.send(18)  # SIGCONT: a stopped process dies only once continued
        for inc in live:
            inc.ended.wait(timeout=10)

    # ---- evidence ---------------------------------------------------------------------------------
    def evidence(self, own_effects_sql: str | None, extra: dict | None = None) -> Evidence:
        return collect_evidence(self.env, self.history, self.run_id, self.incarnations, own_effects_sql,
                                limit=self.limit, options={"grace": self.options.grace, **(extra or {})})


def incarnation_env(env: Environment, inc: str, run_id: str | None, options: RunOptions,
                    steps_module: str) -> dict[str, str]:
    """The environment of one incarnation (docs/contracts.md section 2).

    With `run_id` None the incarnation is a queue worker serving many runs: its service URLs carry the
    `{run_id}` slot that the runtime fills in per run, so each request still lands under its run's prefix.
    """
    svc = env.services

    def url(service: str) -> str:
        return svc.url(service, run_id) if run_id is not None else f"{svc.base_url(service)}/runs/{{run_id}}"

    out = dict(os.environ)
    out.update({
        "DATABASE_URL": env.pg.dsn,
        "MAILER_URL": url("mailer"),
        "LEDGER_URL": url("ledger"),
        "WEBHOOK_URL": url("webhook"),
        "ANTHROPIC_BASE_URL": url("model"),
        "ANTHROPIC_API_KEY": "killpoint-fake-key",
        "KILLPOINT_SOCKET": str(env.socket_path),
        "KILLPOINT_INCARNATION": inc,
        "KILLPOINT_RUN_ID": run_id or "",
        "KILLPOINT_STEPS": steps_module,
        "KILLPOINT_PARAMS": json.dumps(options.params, sort_keys=True),
        "KILLPOINT_WORKER_ID": inc,
        "KILLPOINT_LEASE_SECONDS": str(options.lease_seconds),
        "KILLPOINT_DRAIN_SECONDS": str(options.drain_seconds),
        "KILLPOINT_STEP_DELAY": str(options.step_delay),
        "PGAPPNAME": inc,
        "NO_PROXY": "127.0.0.1,localhost",
        "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), out.get("PYTHONPATH")) if p),
    })
    out.update(options.extra_env)
    return out


def collect_evidence(env: Environment, history: History, run_id: str, incarnations: list[Incarnation],
                     own_effects_sql: str | None, *, limit: str | None, options: dict,
                     watch: list[Incarnation] | None = None) -> Evidence:
    """Everything the checkers may look at for `run_id`, once its incarnations have ended. A process of
    `watch` (default: `incarnations`) still alive is a leftover."""
    with env.connect() as conn:
        row = conn.execute("SELECT data, data::text FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone()
        writes = audit.writes(conn, run_id)
        own = [list(r) for r in conn.execute(own_effects_sql, (run_id,)).fetchall()] if own_effects_sql else []
    svc = env.services
    leftovers = []
    for inc in incarnations if watch is None else watch:
        with contextlib.suppress(psutil.NoSuchProcess):
            if inc.pid and psutil.Process(inc.pid).status() != psutil.STATUS_ZOMBIE and inc.alive():
                leftovers.append(f"pid {inc.pid} ({inc.inc})")
    return Evidence(
        run_id=run_id,
        events=[e for e in history.events() if e.get("run_id") == run_id],
        final=row[0] if row else None,
        final_raw=row[1] if row else None,
        audit=writes,
        attempts=svc.attempts(run_id),
        effects=svc.effects(run_id),
        model_requests=svc.model_requests(run_id),
        own_effects=own,
        incarnations=[{"inc": i.inc, "role": i.role, "pid": i.pid, "exit_code": i.exit_code,
                       "signal": i.signal} for i in incarnations],
        limit=limit,
        leftovers=leftovers,
        options=options,
    )
