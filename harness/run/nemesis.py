"""The nemesis: applies one fault to a run held at a kill point, and always says what to do next.

`Nemesis.apply(fault, incarnation, service_point)` runs while the worker (or the service request) waits
at the barrier and returns a `Reaction`:

1. a service action (`drop`, `error`, `overload`, `slow`): the fake service's decision; the worker goes on;
2. `db-crash`: the owned Postgres is crashed and restarted (on a database killpoint does not own the
   fault is recorded as missed: the trial cannot pass on it);
3. no live incarnation to act on (none, or the one the request is from has ended: a request it wrote before
   it died, read after): recorded as missed, the request goes on;
4. `kill`: SIGKILL (and SIGCONT for a frozen one); a held worker point is left unanswered, a held request
   is dropped before its effect or answered into the void after it;
5. `term`: SIGTERM, then SIGKILL after the grace period if the worker is still alive; it goes on (drains).
   A worker already sent one (a second `term` of the schedule meets it while it drains) gets nothing more:
   a deploy sends one SIGTERM per process, and a worker may take a second as "stop now" (a cold shutdown);
6. `clock±N` (a `kill` whose resume is that far away in the worker's time): the run's clock moves by N for
   its later incarnations (`Target.shift_clock`), then SIGKILL as `kill`; where the clock cannot be moved (a
   black-box worker without libfaketime) the fault is recorded as missed and the worker is killed anyway;
7. `stop`: SIGSTOP, the lease lapses, a successor runs until it ends, waits on a lock the frozen one
   holds, or (while the frozen one holds a transaction) makes no progress, then SIGCONT: the zombie goes
   on and must be fenced.

The nemesis talks to a narrow `Target` (the run's id, history and options, the database, a way to expire
the run's lease and to start a successor), never back into whoever drives the run.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import psycopg

from killpoint.env.launcher import Incarnation
from killpoint.env.postgres.handle import PostgresHandle
from killpoint.env.procutil import cpu_wait, cpu_wait_since
from killpoint.fake_services.hooks import Decision
from killpoint.faults.points import base, clock_shift
from killpoint.faults.schedule import Fault
from killpoint.run.history import History
from killpoint.run.options import RunOptions

SERVICE_DECISION = {"drop": Decision.DROP, "error": Decision.ERROR, "overload": Decision.OVERLOAD}
SLOW_MS = 250
STOP_POLL_SECONDS = 0.02
RUN_BARRIER_CTE = """
WITH barrier AS (
  SELECT pid FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock' AND objsubid = 1
    AND classid = (%(key)s::bigint >> 32)::oid AND objid = (%(key)s::bigint & 4294967295)::oid
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
"""
"""This run's SQL barrier session (env/sqlbarrier.py): the one holding the run's advisory lock key. Runs of
one database (trials at `-j 2` on a `--dsn` database) each have a barrier, all named `killpoint-barrier`:
a wait behind another run's barrier says nothing of this run's zombie. A NULL key (no barrier) matches none."""
BLOCKED_BY_SQL = RUN_BARRIER_CTE + """
SELECT 1 FROM pg_stat_activity s JOIN pg_stat_activity z ON z.pid = ANY(pg_blocking_pids(s.pid))
WHERE s.application_name = %(successor)s AND z.application_name = %(zombie)s
UNION ALL
SELECT 1 FROM pg_stat_activity s JOIN barrier b ON b.pid = ANY(pg_blocking_pids(s.pid))
GROUP BY b.pid HAVING count(*) >= 2
UNION ALL
SELECT 1 FROM pg_stat_activity z JOIN barrier b ON b.pid = ANY(pg_blocking_pids(z.pid))
JOIN pg_stat_activity s ON z.pid = ANY(pg_blocking_pids(s.pid))
"""
"""A row when the successor's session waits on a lock the zombie's session holds (sessions are named
by incarnation through PGAPPNAME), or when a second session waits behind the run's SQL barrier that holds
the zombie's checkpoint commit (env/sqlbarrier.py), or on a lock of that held transaction: the successor is
stuck behind the zombie's commit, which a real server would have let through long ago (sessions a
framework names itself, as DBOS's, are counted too). Only this run's barrier counts (`RUN_BARRIER_CTE`)."""
ZOMBIE_TXN_SQL = RUN_BARRIER_CTE + """
SELECT 1 FROM pg_stat_activity z
WHERE z.datname = current_database() AND z.backend_xid IS NOT NULL
  AND (z.application_name = %(zombie)s OR EXISTS (SELECT 1 FROM barrier b WHERE b.pid = ANY(pg_blocking_pids(z.pid))))
"""
"""A row while the zombie holds a transaction that wrote or locked rows: a session named by its incarnation,
or one whose commit the run's SQL barrier holds (a framework's own session names count too)."""
LIVE_SQL = "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()"
"""A row once the successor has a database session of its own (named by its incarnation): it has started
up (a framework's imports can take seconds) and reached its records."""
STALL_SECONDS = 2.0
"""How long a successor that has started (a session of its own, or a point) may report nothing (no point,
no end, no lock wait) while the zombie holds a transaction before it is taken to be stuck behind it (a
worker that skips locked rows, or polls for them): a bound on a successor that cannot move, not a
synchronisation; the run's step delay is added to it."""


@dataclass(frozen=True)
class Reaction:
    """What happens at the barrier after a fault: `release` answers a held worker point (False: it is never
    answered, the worker is dead); `decision` is what a held service request does."""

    release: bool
    decision: Decision


GO = Reaction(True, Decision.GO)


class Target(Protocol):
    """What the nemesis may act on for one run."""

    run_id: str
    history: History
    options: RunOptions
    pg: PostgresHandle

    def connect(self) -> psycopg.Connection: ...

    @property
    def barrier_key(self) -> int | None:
        """The advisory lock key of the run's SQL barrier (a black-box worker's held commits), else None."""
        ...

    def expire_lease(self) -> None:
        """Simulate the passage of time: the run's lease lapses."""

    def spawn_successor(self) -> Incarnation:
        """Start another incarnation of the run (the one that takes over from a frozen worker)."""
        ...

    def remaining(self) -> float:
        """Seconds left of the run's time budget."""
        ...

    def shift_clock(self, seconds: float) -> str | None:
        """Move the wall clock of the run's later incarnations by `seconds`; None, or why it cannot."""
        ...


class Nemesis:
    """Fault actions against one run's incarnations and the environment (see the module docstring)."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def apply(self, fault: Fault, inc: Incarnation | None, service_point: bool) -> Reaction:
        action = fault.action
        if action in SERVICE_DECISION:
            return Reaction(True, SERVICE_DECISION[action])
        if action == "slow":
            return Reaction(True, Decision.slow(SLOW_MS))
        if action == "db-crash":
            return self._db_crash(fault)
        if inc is None:
            self._missed(fault, "no live incarnation")
            return GO
        if not inc.alive():  # a request its sender wrote before it died (run/registry.py, `sender`)
            self._missed(fault, f"no live incarnation: {inc.inc}, whose it is, had ended")
            return GO
        actions: dict[str, Callable[[Incarnation, Fault, bool], Reaction]] = {
            "kill": self._kill, "term": self._term, "stop": self._stop, "clock": self._clock}
        return actions[base(action)](inc, fault, service_point)

    def _missed(self, fault: Fault, reason: str) -> None:
        self.target.history.append("fault.missed", run_id=self.target.run_id, fault=str(fault), reason=reason)

    def _kill(self, inc: Incarnation, fault: Fault, service_point: bool) -> Reaction:
        inc.send(signal.SIGKILL)
        inc.send(signal.SIGCONT)  # a stopped process only dies once continued
        inc.ended.wait(timeout=30)
        # The client is gone. Before the effect, nothing is applied (as a server that notices the closed
        # connection); after it, the effect stays applied and the response goes nowhere.
        return Reaction(False, Decision.GO if fault.point == "effect.applied" else Decision.DROP)

    def _clock(self, inc: Incarnation, fault: Fault, service_point: bool) -> Reaction:
        reason = self.target.shift_clock(clock_shift(fault.action))
        if reason is not None:
            self._missed(fault, reason)
        return self._kill(inc, fault, service_point)

    def _term(self, inc: Incarnation, fault: Fault, service_point: bool) -> Reaction:
        if inc.termed:
            return GO  # it is draining, its grace already running (see the module docstring, 5)
        before = cpu_wait(inc.pid)  # how long a busy machine keeps it from running during the grace
        inc.send(signal.SIGTERM)
        grace = self.target.options.grace
        history, run_id = self.target.history, self.target.run_id

        def escalate() -> None:
            # `ended` follows the journal's inc.end; `exited` is set the moment the exit is known
            if not inc.ended.wait(timeout=grace) and not inc.exited:
                history.append("escalate", run_id=run_id, inc=inc.inc, grace=grace,
                               waited=cpu_wait_since(inc.pid, before))
                inc.send(signal.SIGKILL)
                inc.send(signal.SIGCONT)

        threading.Thread(target=escalate, name=f"killpoint-grace-{inc.inc}", daemon=True).start()
        return GO  # the worker drains: it finishes the step it is in

    def _stop(self, inc: Incarnation, fault: Fault, service_point: bool) -> Reaction:
        """Freeze the worker, let its lease lapse, run a successor to its end, then thaw the zombie.

        A zombie frozen inside a transaction (e.g. at checkpoint.writing) holds its row locks, and a
        successor that needs them waits for as long as the zombie is frozen: then it is thawed at once,
        as a real frozen worker would eventually be, and the two race for the row. A successor that does
        not wait for them (it skips locked rows, or gives up and polls) shows no lock wait: it is given
        the stall bound to make progress, then the zombie is thawed all the same.
        """
        inc.send(signal.SIGSTOP)
        inc.stopped.wait(timeout=10)
        self.target.expire_lease()
        successor = self.target.spawn_successor()
        why = self._await_successor(inc, successor)
        self.target.history.append("thaw", run_id=self.target.run_id, inc=inc.inc, why=why)
        inc.send(signal.SIGCONT)
        return GO

    def _await_successor(self, zombie: Incarnation, successor: Incarnation) -> str:
        """Wait until the successor ends, waits on a lock the zombie's session holds, makes no progress
        (once started, no point of its own for the stall bound) while the zombie holds a transaction, or
        time runs out.

        Progress is read from the history (the successor's points: requests it sent, commits the SQL
        barrier held), the lock waits from the server; the stall bound only ends a wait that no event
        would end (a successor that skips locked rows, or polls for them, never waits on them)."""
        history = self.target.history
        seen = len(history)
        stall = STALL_SECONDS + self.target.options.step_delay
        moved: float | None = None  # when the successor last showed progress; None: it has not started yet
        names = {"successor": successor.inc, "zombie": zombie.inc, "key": self.target.barrier_key}
        with self.target.connect() as conn:
            while not successor.ended.wait(timeout=STOP_POLL_SECONDS):
                if self.target.remaining() <= 0:
                    return "time budget spent"
                row = conn.execute(BLOCKED_BY_SQL, names).fetchone()
                if row is not None:
                    return "successor waits on a lock the zombie holds"
                new = history.since(seen)
                if any(e.get("inc") == successor.inc for e in new):
                    moved = time.monotonic()
                seen = new[-1].i + 1 if new else seen
                if moved is None and conn.execute(LIVE_SQL, (successor.inc,)).fetchone() is not None:
                    moved = time.monotonic()
                if (moved is not None and time.monotonic() - moved >= stall
                        and conn.execute(ZOMBIE_TXN_SQL, names).fetchone() is not None):
                    return f"successor made no progress for {stall:g}s while the zombie held its transaction"
        return "successor ended"

    def _db_crash(self, fault: Fault) -> Reaction:
        pg = self.target.pg
        if not pg.owned:
            self._missed(fault, "database not owned: killpoint can only crash a server it started")
            return GO
        pg.crash()
        self.target.history.append("db.down", run_id=self.target.run_id)
        pg.restart()
        self.target.history.append("db.up", run_id=self.target.run_id)
        return GO
