"""Checkpoint points of a black-box worker, held from outside by a trigger on the checkpoint table.

A black-box worker (`--worker-cmd`) speaks no kill-point protocol, but it keeps its checkpoints in the
`checkpoints` table. `install` adds a deferred constraint trigger there: at COMMIT of a transaction that
updated a checkpoint row of a run with a row in `killpoint_barrier`, the trigger takes that run's
advisory lock in shared mode. While the run is active, a `SqlBarrier` holds the same lock exclusively on
its own session, so the worker's COMMIT waits inside its checkpoint transaction: `checkpoint.writing`.

The barrier's thread polls `pg_locks` for a backend waiting on the lock (server state, with no sleep
for synchronisation), and hands the point to the controller (`RunListener.on_held_point`):

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

Only the first write of a run (an INSERT, seq 0) is not held, as a white-box worker reports no point for
it. The step of the point is the cursor of the last committed checkpoint (the step being checkpointed).
"""

from __future__ import annotations

import hashlib
import signal
import threading
import time
from typing import Any

import psycopg

from killpoint.env.launcher import Incarnation
from killpoint.env.listener import RunListener

POLL_SECONDS = 0.002
TERMINATE_DEADLINE = 10.0
FREEZE_DEADLINE = 10.0

INSTALL_SQL = """
CREATE TABLE IF NOT EXISTS killpoint_barrier (run_id text PRIMARY KEY, key bigint NOT NULL);
CREATE OR REPLACE FUNCTION killpoint_barrier_wait() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k bigint;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    SELECT key INTO k FROM killpoint_barrier WHERE run_id = NEW.run_id;
    IF FOUND THEN
      PERFORM pg_advisory_xact_lock_shared(k);
    END IF;
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS killpoint_barrier_trigger ON {table};
CREATE CONSTRAINT TRIGGER killpoint_barrier_trigger AFTER INSERT OR UPDATE ON {table}
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION killpoint_barrier_wait();
"""

WAITERS_SQL = """
SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
  AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid AND l.pid <> pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.pid
"""


def install(conn: psycopg.Connection, table: str = "checkpoints") -> None:
    """Create the barrier table and the deferred trigger on `table` (idempotent)."""
    conn.execute(INSTALL_SQL.format(table=table))  # type: ignore[arg-type]
    conn.commit()


def key_of(run_id: str) -> int:
    """The run's advisory lock key: positive, 62 bits, stable across processes."""
    return int.from_bytes(hashlib.blake2b(f"killpoint-barrier:{run_id}".encode(), digest_size=8).digest()) >> 2


class SqlBarrier:
    """Holds one run's checkpoint commits while the run is active. `close()` lets every waiter go (after
    terminating the backends of workers that are gone) and removes the run's barrier row."""

    def __init__(self, dsn: str, ctl: RunListener) -> None:
        self._dsn, self._ctl = dsn, ctl
        self.key = key_of(ctl.run_id)
        self._stop = threading.Event()
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

    def close(self) -> None:
        self._stop.set()
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

    # ---- the watcher ------------------------------------------------------------------------------
    def _waiters(self) -> list[tuple[int, str]]:
        rows = self._conn.execute(WAITERS_SQL, (self.key >> 32, self.key & 0xFFFFFFFF)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                waiters = self._waiters()
                if not waiters:
                    self._stop.wait(POLL_SECONDS)  # a poll interval of server state, not a synchronisation
                    continue
                self._hold(*waiters[0])
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
        row: Any = self._conn.execute("SELECT data->>'cursor', seq FROM checkpoints WHERE run_id = %s",
                                      (self._ctl.run_id,)).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def _hold(self, pid: int, app: str) -> None:
        """One worker waits inside its checkpoint COMMIT: hand the point over, then release or abort it."""
        step, seq = self._committed()
        if not self._ctl.on_held_point(step, "checkpoint.writing", app or None, "sql-barrier"):
            self._terminate(pid)  # the worker was killed: its transaction must not commit
            return
        inc = next((i for i in list(self._ctl.incarnations) if i.inc == app and i.alive()), None)
        frozen = inc is not None and inc.send(signal.SIGSTOP) and inc.stopped.wait(timeout=FREEZE_DEADLINE)
        after = None
        try:
            self._conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            self._conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))  # granted once the worker's txn ended
            _, after = self._committed()
        finally:
            if after is None or after == seq:  # not committed (or the server is gone): nothing to hold
                if frozen and inc is not None:
                    inc.send(signal.SIGCONT)
        if after is None or after == seq:
            return
        # Held in its own thread: the barrier goes on serving other writers meanwhile (a `stop` here runs a
        # successor whose checkpoints the barrier must hold and release while this worker stays frozen).
        held = threading.Thread(target=self._committed_point, args=(step, app, after, inc if frozen else None),
                                name=f"killpoint-sqlbarrier-committed-{app}", daemon=True)
        self._held.append(held)
        held.start()

    def _committed_point(self, step: str | None, app: str, seq: int, frozen: Incarnation | None) -> None:
        try:
            self._ctl.on_held_point(step, "checkpoint.committed", app or None, "sql-barrier", seq)
        finally:
            if frozen is not None:
                frozen.send(signal.SIGCONT)

    def _terminate(self, pid: int) -> None:
        self._conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + TERMINATE_DEADLINE
        while time.monotonic() < deadline:
            if self._conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None:
                return
            self._stop.wait(POLL_SECONDS)
