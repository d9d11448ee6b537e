"""The checkpoint audit trail: a trigger that records every committed checkpoint write.

It works for any worker, in any language, that keeps its checkpoints in a table of the seeds' shape
(`run_id`, `seq`, `status`, `data` with a `cursor`): the trigger runs in the writer's transaction, so
only committed writes are recorded, and a write refused by the monotonic guard records nothing. The
writer is identified by `application_name`, which the harness sets per incarnation through PGAPPNAME.
"""

from __future__ import annotations

import psycopg

AUDIT_SQL = """
CREATE TABLE IF NOT EXISTS killpoint_audit (
  id      bigserial PRIMARY KEY,
  run_id  text NOT NULL,
  seq     bigint,
  cursor  text,
  status  text,
  app     text,
  at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION killpoint_audit_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO killpoint_audit (run_id, seq, cursor, status, app)
  VALUES (NEW.run_id, NEW.seq, NEW.data->>'cursor', NEW.status, current_setting('application_name', true));
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS killpoint_audit_trigger ON {table};
CREATE TRIGGER killpoint_audit_trigger AFTER INSERT OR UPDATE ON {table}
  FOR EACH ROW EXECUTE FUNCTION killpoint_audit_write();
"""


def install(conn: psycopg.Connection, table: str = "checkpoints") -> None:
    """Create the audit table and the trigger on `table` (idempotent)."""
    conn.execute(AUDIT_SQL.format(table=table))  # type: ignore[arg-type]
    conn.commit()


def writes(conn: psycopg.Connection, run_id: str) -> list[dict]:
    """The run's committed checkpoint writes in commit order."""
    rows = conn.execute(
        "SELECT seq, cursor, status, app FROM killpoint_audit WHERE run_id = %s ORDER BY id", (run_id,)
    ).fetchall()
    return [{"seq": r[0], "cursor": r[1], "status": r[2], "app": r[3]} for r in rows]
