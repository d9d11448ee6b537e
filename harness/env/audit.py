"""The checkpoint audit trail: a trigger that records every committed checkpoint write.

It works for any worker, in any language, that keeps its checkpoints in a table of the seeds' shape
(`run_id`, `seq`, `status`, `data` with a `cursor`): the trigger runs in the writer's transaction, so
only committed writes are recorded, and a write refused by the monotonic guard records nothing. The
writer is identified by the session's `killpoint.inc` setting, which the harness passes per incarnation
through PGOPTIONS (`-c killpoint.inc=<incarnation>`), else by its `application_name` (PGAPPNAME): a
framework that names its sessions itself (DBOS's `dbos_transact`) overrides the latter, never the former.
"""

from __future__ import annotations

import psycopg

from killpoint.adapters import Hold

AUDIT_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS killpoint_audit (
  id      bigserial PRIMARY KEY,
  run_id  text NOT NULL,
  seq     bigint,
  cursor  text,
  status  text,
  app     text,
  at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION killpoint_writer() RETURNS text LANGUAGE sql STABLE AS $f$
  SELECT coalesce(nullif(current_setting('killpoint.inc', true), ''), current_setting('application_name', true))
$f$;
"""
"""The audit table and the function naming the writing incarnation, shared by both triggers."""

AUDIT_SQL = AUDIT_TABLE_SQL + """
CREATE OR REPLACE FUNCTION killpoint_audit_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO killpoint_audit (run_id, seq, cursor, status, app)
  VALUES (NEW.run_id, NEW.seq, NEW.data->>'cursor', NEW.status, killpoint_writer());
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS killpoint_audit_trigger ON {table};
CREATE TRIGGER killpoint_audit_trigger AFTER INSERT OR UPDATE ON {table}
  FOR EACH ROW EXECUTE FUNCTION killpoint_audit_write();
"""


def install(conn: psycopg.Connection, table: str = "checkpoints", hold: Hold | None = None) -> None:
    """Create the audit table and the trigger on `table` (idempotent); with `hold` (an adapter's table,
    killpoint/adapters), a trigger reading the row as jsonb records the writes `hold.when` selects, with
    the adapter's seq, cursor and status expressions."""
    if hold is None or hold.owned:
        conn.execute(AUDIT_SQL.format(table=hold.table if hold else table))  # type: ignore[arg-type]
    else:
        conn.execute(ADAPTER_AUDIT_SQL.format(fn=_function(hold), table=hold.table, when=hold.when,  # type: ignore[arg-type]
                                              run_column="'" + hold.run_column.replace("'", "''") + "'",
                                              seq=hold.seq, cursor=hold.cursor, status=hold.status))
    conn.commit()


def uninstall(conn: psycopg.Connection, hold: Hold) -> None:
    """Remove the audit trigger and its function from an adapter's table (the table itself stays)."""
    conn.execute(f"DROP TRIGGER IF EXISTS killpoint_audit_trigger ON {hold.table}")  # type: ignore[arg-type]
    conn.execute(f"DROP FUNCTION IF EXISTS {_function(hold)}()")  # type: ignore[arg-type]
    conn.commit()


def _function(hold: Hold) -> str:
    return "killpoint_audit_write_" + "".join(c if c.isalnum() else "_" for c in hold.table)


ADAPTER_AUDIT_SQL = AUDIT_TABLE_SQL + """
CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r jsonb;
BEGIN
  r := to_jsonb(NEW);
  IF {when} THEN
    INSERT INTO killpoint_audit (run_id, seq, cursor, status, app)
    VALUES (r->>{run_column}, {seq}, {cursor}, {status}, killpoint_writer());
  END IF;
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS killpoint_audit_trigger ON {table};
CREATE TRIGGER killpoint_audit_trigger AFTER INSERT OR UPDATE ON {table}
  FOR EACH ROW EXECUTE FUNCTION {fn}();
"""


def writes(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The run's committed checkpoint writes in commit order."""
    rows = conn.execute(
        "SELECT seq, cursor, status, app FROM killpoint_audit WHERE run_id = %s ORDER BY id", (run_id,)
    ).fetchall()
    return [{"seq": r[0], "cursor": r[1], "status": r[2], "app": r[3]} for r in rows]


def ensure_table(conn: psycopg.Connection) -> None:
    """Create the (empty) audit table alone: an adapter's trigger comes once its framework made its table."""
    conn.execute(ADAPTER_AUDIT_SQL.split("CREATE OR REPLACE FUNCTION")[0])  # type: ignore[arg-type]
    conn.commit()


def installed(conn: psycopg.Connection) -> bool:
    """True when the audit table exists (an adapter's trigger is installed once its framework made its table)."""
    row = conn.execute("SELECT to_regclass('killpoint_audit') IS NOT NULL").fetchone()
    return bool(row and row[0])
