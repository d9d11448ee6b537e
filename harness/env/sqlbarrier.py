"""Checkpoint points of a black-box worker, held from outside by a trigger on the checkpoint table.

A black-box worker (`--worker-cmd`) speaks no kill-point protocol, but it keeps its checkpoints in a
table: the seeds' `checkpoints`, or the one its framework's adapter names (`Hold` in
killpoint/adapters: LangGraph's `checkpoints` by thread_id, DBOS's `dbos.operation_outputs`; the row is
read as jsonb, so the trigger needs no column of the seeds' shape). `install` adds a deferred constraint
trigger there (`uninstall` removes it from a table killpoint did not create): at COMMIT of a transaction that
updated a checkpoint row of a run with a row in `killpoint_barrier`, the trigger takes that run's
advisory lock in shared mode. While the run is active, a `SqlBarrier` holds the same lock exclusively on
its own session, so the worker's COMMIT waits inside its checkpoint transaction: `checkpoint.writing`.

The barrier's thread polls `pg_locks` for a backend waiting on the lock (server state, with no sleep
for synchronisation): every `POLL_SECONDS` while the run is busy, i.e. for `BUSY_SECONDS` after a sign of
life (`nudge`: the environment calls it when an incarnation of the run starts or one of its requests
reaches a fake service) or a held commit; otherwise the interval doubles up to `IDLE_POLL_SECONDS` (a poll
costs ~0.15 ms of CPU between the harness and the server, and a framework's worker spends most of its life
in its own start, its polling sleeps and its model calls: polled every 2 ms throughout, a DBOS trial spent
~0.2 s of CPU on it). It hands the point to the controller (`RunListener.on_held_point`):

- released (no fault, or a fault that lets the worker go on, e.g. `term`): the worker's process (the
  incarnation its session's application_name names, PGAPPNAME) is frozen with SIGSTOP while it waits for
  the answer to its COMMIT; the session unlocks and locks again, which is granted once the worker's
  transaction has ended. If the run's stored seq moved, that moment is `checkpoint.committed`, and the
  worker is held there (still frozen, its COMMIT answer unread) until the controller releases it; then
  SIGCONT. A worker whose session does not carry its incarnation id cannot be frozen: its
  `checkpoint.committed` is only observed, and a fault there races with its next step.
- killed: the worker process is dead but its backend is still waiting inside COMMIT; the barrier
  terminates that backend (the transaction aborts, as it would for a crash before COMMIT) and keeps the
  lock.

Only the writes `Hold.when` selects are held (the seeds' table: every UPDATE; the first write of a run, an
INSERT at seq 0, is not, as a white-box worker reports no point for it). The step of the point is the
adapter's cursor over the committed records (the step being checkpointed), and a commit is seen by the
adapter's progress marker moving.
"""

from __future__ import annotations

import hashlib
import signal
import threading
import time

import psycopg

from killpoint.adapters import Adapter, CheckpointsAdapter, Hold
from killpoint.env.launcher import Incarnation
from killpoint.env.listener import RunListener

POLL_SECONDS = 0.002
BUSY_SECONDS = 0.1
IDLE_POLL_SECONDS = 0.05
TERMINATE_DEADLINE = 10.0
FREEZE_DEADLINE = 10.0

BARRIER_TABLE_SQL = "CREATE TABLE IF NOT EXISTS killpoint_barrier (run_id text PRIMARY KEY, key bigint NOT NULL)"

TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k bigint; r jsonb;
BEGIN
  r := to_jsonb(NEW);
  IF {when} THEN
    SELECT key INTO k FROM killpoint_barrier WHERE run_id = r->>{run_column};
    IF FOUND THEN
      PERFORM pg_advisory_xact_lock_shared(k);
    END IF;
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS killpoint_barrier_trigger ON {table};
CREATE CONSTRAINT TRIGGER killpoint_barrier_trigger AFTER INSERT OR UPDATE ON {table}
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {fn}();
"""

WAITERS_SQL = """
SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
  AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid AND l.pid <> pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.pid
"""


def install(conn: psycopg.Connection, table: str = "checkpoints", hold: Hold | None = None) -> None:
    """Create the barrier table and the deferred trigger on the table `hold` names (default: the seeds'
    `checkpoints`, held at each UPDATE), idempotent. The row is read as jsonb, so any column names do."""
    hold = hold or Hold(table=table, run_column="run_id", when="TG_OP = 'UPDATE'", owned=True)
    conn.execute(BARRIER_TABLE_SQL)  # type: ignore[arg-type]
    conn.execute(TRIGGER_SQL.format(fn=_function(hold), when=hold.when, table=hold.table,  # type: ignore[arg-type]
                                    run_column=_literal(hold.run_column)))
    conn.commit()


def uninstall(conn: psycopg.Connection, hold: Hold) -> None:
    """Remove the trigger and its function from `hold.table` (a user's table keeps nothing of killpoint)."""
    conn.execute(f"DROP TRIGGER IF EXISTS killpoint_barrier_trigger ON {hold.table}")  # type: ignore[arg-type]
    conn.execute(f"DROP FUNCTION IF EXISTS {_function(hold)}()")  # type: ignore[arg-type]
    conn.commit()


def _function(hold: Hold) -> str:
    if hold.table == "checkpoints" and hold.run_column == "run_id":
        return "killpoint_barrier_wait"
    return "killpoint_barrier_wait_" + "".join(c if c.isalnum() else "_" for c in hold.table)


def next_interval(interval: float, busy: bool) -> float:
    """The watcher's wait after a poll that found no waiter, `interval` being its last: `POLL_SECONDS` while
    the run is busy, else twice the last, up to `IDLE_POLL_SECONDS`."""
    return POLL_SECONDS if busy else min(interval * 2, IDLE_POLL_SECONDS)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def key_of(run_id: str, scope: str = "") -> int:
    """The run's advisory lock key: positive, 62 bits, stable across processes. Advisory locks are shared by
    the whole database, so `scope` (the session's DSN, which names its own schema on a `--dsn` database)
    keeps two sessions' runs of the same id apart."""
    text = f"killpoint-barrier:{scope}:{run_id}" if scope else f"killpoint-barrier:{run_id}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest()) >> 2


class SqlBarrier:
    """Holds one run's checkpoint commits while the run is active. `close()` lets every waiter go (after
    terminating the backends of workers that are gone) and removes the run's barrier row."""

    def __init__(self, dsn: str, ctl: RunListener, adapter: Adapter | None = None) -> None:
        self._dsn, self._ctl = dsn, ctl
        self._adapter = adapter or CheckpointsAdapter()
        self.key = key_of(ctl.run_id, dsn)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by `nudge` and `close`: the watcher polls again at once
        self._busy_until = time.monotonic() + BUSY_SECONDS
        self._busy = threading.Lock()  # held while a commit is held at checkpoint.writing (see `settle`)
        self._held: list[threading.Thread] = []
        self._conn = self._connect()
        self._conn.execute("INSERT INTO killpoint_barrier (run_id, key) VALUES (%s, %s) "
                           "ON CONFLICT (run_id) DO UPDATE SET key = EXCLUDED.key", (ctl.run_id, self.key))
        self._thread = threading.Thread(target=self._watch, name=f"killpoint-sqlbarrier-{ctl.run_id}", daemon=True)
        self._thread.start()

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self._dsn, autocommit=True, application_name="killpoint-barrier")
        conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
        return conn

    def nudge(self) -> None:
        """The run showed a sign of life (an incarnation started, a request reached a fake service): a
        checkpoint commit may follow at any moment, so poll every `POLL_SECONDS` again from now."""
        self._busy_until = time.monotonic() + BUSY_SECONDS
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=30)
        for held in self._held:
            held.join(timeout=30)
        try:
            self._conn.execute("DELETE FROM killpoint_barrier WHERE run_id = %s", (self._ctl.run_id,))
            for pid, _ in self._waiters():  # the run is over: a worker still waiting here is a leftover
                self._terminate(pid)
        except psycopg.Error:
            pass
        finally:
            self._conn.close()  # ends the session: its lock goes with it

    def settle(self) -> None:
        """Wait until no commit is held at `checkpoint.writing`: a worker that died there (a SIGTERM it does
        not handle) has its commit resolved, landed or aborted, before a successor reads the run, as a
        real server resolves a dead client's COMMIT long before a new process has started."""
        with self._busy:
            pass

    # ---- the watcher ------------------------------------------------------------------------------
    def _waiters(self) -> list[tuple[int, str]]:
        rows = self._conn.execute(WAITERS_SQL, (self.key >> 32, self.key & 0xFFFFFFFF)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def _watch(self) -> None:
        interval = POLL_SECONDS
        while not self._stop.is_set():
            try:
                waiters = self._waiters()
                if not waiters:
                    interval = next_interval(interval, time.monotonic() < self._busy_until)
                    self._wake.wait(interval)  # a poll interval of server state, not a synchronisation
                    self._wake.clear()
                    continue
                with self._busy:
                    self._hold(*waiters[0])
                self._busy_until = time.monotonic() + BUSY_SECONDS  # its next commit may follow at once
                interval = POLL_SECONDS
            except psycopg.OperationalError:
                # The server went away (a db-crash fault): the lock went with the session. Take it again.
                if not self._reconnect():
                    return

    def _reconnect(self) -> bool:
        while not self._stop.is_set():
            try:
                self._conn.close()
                self._conn = self._connect()
                return True
            except psycopg.OperationalError:
                self._stop.wait(0.05)
        return False

    def _committed(self) -> tuple[str | None, int | None]:
        return self._adapter.progress(self._conn, self._ctl.run_id)

    def _hold(self, pid: int, app: str) -> None:
        """One worker waits inside its checkpoint COMMIT: hand the point over, then release or abort it."""
        step, seq = self._committed()
        writing = seq + 1 if seq is not None else None  # the seq being written: one past the last committed
        writer = self._writer(app)  # the incarnation, even when a framework names its sessions otherwise
        who = writer.inc if writer is not None else (app or None)
        if not self._ctl.on_held_point(step, "checkpoint.writing", who, "sql-barrier", writing):
            self._terminate(pid)  # the worker was killed: its transaction must not commit
            return
        inc = writer if writer is not None and writer.alive() else self._writer(app)
        frozen = inc is not None and _freeze(inc)
        after = None
        try:
            self._conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            self._conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))  # granted once the worker's txn ended
            _, after = self._committed()
        finally:
            if after is None or after == seq:  # not committed (or the server is gone): nothing to hold
                if frozen and inc is not None:
                    _thaw(inc)
        if after is None or after == seq:
            return
        # Held in its own thread: the barrier goes on serving other writers meanwhile (a `stop` here runs a
        # successor whose checkpoints the barrier must hold and release while this worker stays frozen).
        held = threading.Thread(target=self._committed_point, args=(step, who or "", after, inc if frozen else None),
                                name=f"killpoint-sqlbarrier-committed-{app}", daemon=True)
        self._held.append(held)
        held.start()

    def _writer(self, app: str) -> Incarnation | None:
        """The live incarnation whose session waits: the one its application_name names, else (a framework
        that names its sessions itself, as DBOS's `dbos_transact`) the run's only live incarnation."""
        live = [i for i in list(self._ctl.incarnations) if i.alive()]
        named = next((i for i in live if i.inc == app), None)
        return named if named is not None or len(live) != 1 else live[0]

    def _committed_point(self, step: str | None, app: str, seq: int, frozen: Incarnation | None) -> None:
        try:
            self._ctl.on_held_point(step, "checkpoint.committed", app or None, "sql-barrier", seq)
        finally:
            if frozen is not None:
                _thaw(frozen)

    def _terminate(self, pid: int) -> None:
        self._conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + TERMINATE_DEADLINE
        while time.monotonic() < deadline:
            if self._conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None:
                return
            self._stop.wait(POLL_SECONDS)


def _freeze(inc: Incarnation) -> bool:
    """SIGSTOP `inc` and wait until it is stopped; False at once if it is gone or dies meanwhile (a worker
    that does not handle the SIGTERM it just got), not after the whole freeze deadline."""
    if not inc.send(signal.SIGSTOP):
        return False
    deadline = time.monotonic() + FREEZE_DEADLINE
    while time.monotonic() < deadline and not inc.exited:
        if inc.stopped.wait(timeout=0.01):  # either event ends the wait; this only re-checks `exited`
            return True
    return False


def _thaw(inc: Incarnation) -> None:
    """SIGCONT a worker this barrier froze. Its `stopped` flag is cleared first, not when the launcher
    hears of the continue: the worker's next request may reach a fake service before that, and must be
    attributed to it (a stopped incarnation is taken for a zombie and gets no faults)."""
    inc.stopped.clear()
    inc.send(signal.SIGCONT)
