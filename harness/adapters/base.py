"""The adapter interface (documented in `killpoint.adapters`) and the default adapter, the seeds' table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from killpoint.errors import UsageError


@dataclass(frozen=True)
class Hold:
    """Where a runtime commits its steps: the table, the column naming the run, and which writes are held
    (`when`). `seq`, `cursor` and `status` are SQL expressions over `r` (the written row as jsonb) that the
    audit trigger records for each committed write: a number that grows with the run's progress, the step
    in progress after the write, and the run's status after it (NULL where the runtime has none)."""

    table: str
    run_column: str
    when: str
    owned: bool = False
    seq: str = "NULL"
    cursor: str = "NULL"
    status: str = "NULL"


class Adapter(Protocol):
    """A runtime's records of a run (see the module docstring for the contract of each method)."""

    name: str
    hold: Hold
    concurrent_runs: bool
    """False when two runs of the runtime in one database would not stay apart (then `-j` is 1)."""
    serial_reason: str
    system_schemas: tuple[str, ...]
    """Schemas the runtime creates by name whatever the search path (DBOS's `dbos`): on a `--dsn` database
    the session then gets a database of its own, so that nothing of them is left in the user's."""

    def status(self, conn: psycopg.Connection, run_id: str) -> str | None: ...

    def cursor(self, conn: psycopg.Connection, run_id: str) -> str | None: ...

    def progress(self, conn: psycopg.Connection, run_id: str) -> tuple[str | None, int | None]: ...

    def final(self, conn: psycopg.Connection, run_id: str) -> tuple[dict | None, str | None]: ...

    def expire(self, conn: psycopg.Connection, run_id: str) -> None: ...

    def statuses(self, conn: psycopg.Connection, run_ids: list[str]) -> dict[str, str | None]: ...

    def expire_owners(self, conn: psycopg.Connection, owners: list[str]) -> int: ...

    def submit(self, conn: psycopg.Connection, run_ids: list[str], module: str, params: dict) -> None: ...

    def retire(self, conn: psycopg.Connection, run_id: str) -> int: ...

    def fence(self, conn: psycopg.Connection) -> None: ...

    def unfence(self, conn: psycopg.Connection) -> None: ...

    def notes(self, conn: psycopg.Connection, run_id: str) -> list[str]: ...

    def recorded(self, conn: psycopg.Connection, besides: list[str], limit: int = 5) -> list[str]: ...

    def no_checkpoint_hint(self, commits: int) -> str:
        """Why a crash-free run that made `commits` checkpoint commits made none inside a step (so a
        scenario whose faults land at checkpoint points has nothing to test), and how to change that."""
        ...


class FrameworkRecords:
    """The part of an adapter over a framework's own records that has no leases and starts its own runs
    (LangGraph, DBOS): nothing to expire, statuses one run at a time, and no runs created by the harness."""

    name: str

    def status(self, conn: psycopg.Connection, run_id: str) -> str | None:
        raise NotImplementedError

    def expire(self, conn: psycopg.Connection, run_id: str) -> None:
        """No lease to expire: the framework's records alone say where a successor resumes."""

    def expire_owners(self, conn: psycopg.Connection, owners: list[str]) -> int:
        """No lease to expire (see `expire`): none lapses."""
        return 0

    def statuses(self, conn: psycopg.Connection, run_ids: list[str]) -> dict[str, str | None]:
        return {r: self.status(conn, r) for r in run_ids}

    def retire(self, conn: psycopg.Connection, run_id: str) -> int:
        """Nothing to retire: a later run's worker picks up nothing of this run by itself."""
        return 0

    def notes(self, conn: psycopg.Connection, run_id: str) -> list[str]:
        """Nothing known of the framework's records that explains a failure (an adapter overrides it)."""
        return []

    def fence(self, conn: psycopg.Connection) -> None:
        """Nothing to fence: runs of the framework stay apart by their own keys."""

    def unfence(self, conn: psycopg.Connection) -> None:
        """Nothing fenced (see `fence`)."""

    def no_checkpoint_hint(self, commits: int) -> str:
        return f"the {self.name} worker recorded no step's progress while a step was in flight"

    def submit(self, conn: psycopg.Connection, run_ids: list[str], module: str, params: dict) -> None:
        """Refused: the framework's worker starts its runs itself, the harness writes none of its records."""
        raise UsageError("cannot-submit", f"the {self.name!r} adapter cannot create runs for queue workers: its "
                         "framework starts its own runs", "run scenarios with queue workers (fleet, stalled-sweep) "
                         "on the seeds' checkpoints adapter (the default)")


def fetch_one(conn: psycopg.Connection, sql: str, params: dict | tuple) -> Any:
    """The first row of `sql` over a framework's own tables, or None when one of them does not exist yet: a
    worker that died before its framework created them (a script that fails at import, a wrong path in
    `--worker-cmd`) recorded nothing, and its run reads as one with no records, never as a harness error.
    `conn` is autocommit (the session's pooled connections are), so the failed read leaves nothing aborted."""
    try:
        return conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
    except psycopg.errors.UndefinedTable:
        return None


def fetch_all(conn: psycopg.Connection, sql: str, params: dict | tuple) -> list[Any]:
    """Every row of `sql` over a framework's own tables, or [] when one of them does not exist yet (see
    `fetch_one`)."""
    try:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]
    except psycopg.errors.UndefinedTable:
        return []


def table_exists(conn: psycopg.Connection, table: str) -> bool:
    """True when `table` (maybe schema-qualified) exists on the connection's search path."""
    row: Any = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])


class CheckpointsAdapter:
    """The seeds' `checkpoints` table (docs/contracts.md section 3): the reference runtime's records."""

    name = "checkpoints"
    concurrent_runs = True
    serial_reason = ""
    system_schemas: tuple[str, ...] = ()
    hold = Hold(table="checkpoints", run_column="run_id", when="TG_OP = 'UPDATE'", owned=True)

    def status(self, conn: psycopg.Connection, run_id: str) -> str | None:
        row: Any = conn.execute("SELECT status FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone()
        return row[0] if row else None

    def cursor(self, conn: psycopg.Connection, run_id: str) -> str | None:
        return self.progress(conn, run_id)[0]

    def progress(self, conn: psycopg.Connection, run_id: str) -> tuple[str | None, int | None]:
        row: Any = conn.execute("SELECT data->>'cursor', seq FROM checkpoints WHERE run_id = %s",
                                (run_id,)).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def final(self, conn: psycopg.Connection, run_id: str) -> tuple[dict | None, str | None]:
        row: Any = conn.execute("SELECT data, data::text FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def expire(self, conn: psycopg.Connection, run_id: str) -> None:
        conn.execute("UPDATE leases SET expires_at = now() - interval '1 second' WHERE run_id = %s", (run_id,))

    def statuses(self, conn: psycopg.Connection, run_ids: list[str]) -> dict[str, str | None]:
        rows = dict(conn.execute("SELECT run_id, status FROM checkpoints WHERE run_id = ANY(%s)",
                                 (run_ids,)).fetchall())
        return {r: rows.get(r) for r in run_ids}

    def expire_owners(self, conn: psycopg.Connection, owners: list[str]) -> int:
        if not owners:
            return 0
        cur = conn.execute("UPDATE leases SET expires_at = now() - interval '1 second' "
                           "WHERE owner = ANY(%s) AND expires_at > now()", (owners,))
        return cur.rowcount

    def retire(self, conn: psycopg.Connection, run_id: str) -> int:
        """Nothing retired: the seeds' runtime resumes a run only through a worker or a job the harness starts."""
        return 0

    def notes(self, conn: psycopg.Connection, run_id: str) -> list[str]:
        """The seeds' records explain nothing beyond what the checkers read."""
        return []

    def recorded(self, conn: psycopg.Connection, besides: list[str], limit: int = 5) -> list[str]:
        return [r[0] for r in fetch_all(conn, "SELECT run_id FROM checkpoints WHERE NOT (run_id = ANY(%s)) "
                                              "ORDER BY run_id LIMIT %s", (besides, limit))]

    def fence(self, conn: psycopg.Connection) -> None:
        """Nothing to fence: a run's row and lease are its own."""

    def unfence(self, conn: psycopg.Connection) -> None:
        """Nothing fenced (see `fence`)."""

    def no_checkpoint_hint(self, commits: int) -> str:
        return ("the agent committed no checkpoint of a step to the checkpoints table" if not commits else
                "no commit of the checkpoints table was made while a step was in flight")

    def submit(self, conn: psycopg.Connection, run_ids: list[str], module: str, params: dict) -> None:
        """Each run as the reference runtime's application creates it: its first checkpoint (seq 0, at the
        step module's start, its initial state from `params`) and a resume job for a queue worker."""
        from killpoint.env.stepmodule import submit_runs

        submit_runs(conn, module, run_ids, params)
