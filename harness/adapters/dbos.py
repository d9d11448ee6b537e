"""DBOS's system database as a run's records: `workflow_status` and `operation_outputs` by workflow id.

A killpoint run id is the workflow id (the worker starts the workflow under `SetWorkflowID(run_id)`, with
its system database on `DATABASE_URL` and an executor id of its own, e.g. the run id); step function
names are the steps. Read without importing DBOS, from its tables in schema `dbos`:

1. Status: the workflow's `status`: SUCCESS is "done"; ERROR, CANCELLED and the exceeded states are
   "failed"; PENDING and ENQUEUED are "running"; no row is None.
2. A step's commit is the INSERT of its `operation_outputs` row (function id n, function name), held by
   the SQL barrier; its seq (in the audit trail, and the marker that moves at each commit) is the
   function id, which grows by one per operation of the workflow.
3. The cursor (the step in progress) is the step that a successful workflow of the same name recorded
   at the next function id: a DBOS workflow is deterministic, so the crash-free run names the steps in
   order. Before any run has succeeded it is None (attribution then relies on the header or the key).
4. The final record is the workflow's status and output, as `state`, and the executor id that ran it
   last (`executor_id`: one per run, else DBOS's recovery may run one run's workflow in another's process).
5. Retiring a run (`retire`, once its evidence is read and its processes are gone) cancels its workflow and
   the workflows it started (`parent_workflow_id`), as `DBOS.cancel_workflow` does, where they are not
   finished: DBOS's recovery at launch puts a dead executor's PENDING workflow back on its internal queue
   (ENQUEUED), and every process of the application (its name and version) dequeues from it, so a trial
   whose last incarnation died after that, e.g. a mixed-faults run ended by its incarnation bound, left a
   workflow that the next trial's worker ran, with that run's credentials: its effects were the later run's
   duplicates. Within a run nothing changes: recovery of the run's own workflow is what the trial tests.
6. DBOS creates its schema `dbos` by name, outside the session schema of a `--dsn` database
   (`system_schemas`): there the session runs in a database of its own on the user's server, dropped at
   its end (harness/env/postgres/dsn.py `isolate`), so no `dbos` schema is left in the user's database.
7. Runs go at the same time (`-j`) behind a fence (`fence`, installed with the barrier once DBOS's tables
   exist): the internal queue that recovery re-enqueues onto is one per system database, so while run A's
   successor re-enqueues A's workflow, run B's live process could dequeue it and run A's steps with B's
   credentials, under B's name. A trigger on `workflow_status` skips a claim (ENQUEUED -> PENDING, DBOS's
   dequeue `UPDATE ... RETURNING`) made by an incarnation of one run (the `killpoint.inc` session setting,
   `run#n`) of a workflow whose root (`parent_workflow_id` up) is another active run (a row in
   `killpoint_barrier`): DBOS starts only the rows its update returned, so the row stays ENQUEUED for its
   own run's process, as it would on a system database of its own. Each refusal is logged in
   `killpoint_fenced`. A claim by an unnamed session, of a workflow of no active run, or within a run
   (a zombie and its successor) is DBOS's own, unchanged.
"""

from __future__ import annotations

from typing import Any

import psycopg

from killpoint.adapters.base import FrameworkRecords, Hold, fetch_all, fetch_one, table_exists

SCHEMA = "dbos"

FAILED = {"ERROR", "CANCELLED", "RETRIES_EXCEEDED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}
FINISHED = ("SUCCESS", *sorted(FAILED))

RETIRE_SQL = f"""
WITH RECURSIVE family(id) AS (
    SELECT %(run)s::text
    UNION SELECT w.workflow_uuid FROM {SCHEMA}.workflow_status w JOIN family f ON w.parent_workflow_id = f.id)
UPDATE {SCHEMA}.workflow_status SET status = 'CANCELLED', queue_name = NULL
WHERE workflow_uuid IN (SELECT id FROM family) AND status <> ALL(%(finished)s)
"""
"""The run's workflow and its descendants, cancelled where unfinished (DBOS's own cancel: status CANCELLED,
off its queue), so that no process dequeues or recovers them."""

CURSOR_SQL = f"""
WITH mine AS (SELECT w.name, (SELECT coalesce(max(function_id), -1) FROM {SCHEMA}.operation_outputs o
                              WHERE o.workflow_uuid = w.workflow_uuid) AS last
              FROM {SCHEMA}.workflow_status w WHERE w.workflow_uuid = %(run)s)
SELECT (SELECT o.function_name FROM {SCHEMA}.operation_outputs o
        JOIN {SCHEMA}.workflow_status s ON s.workflow_uuid = o.workflow_uuid
        WHERE s.status = 'SUCCESS' AND s.name = mine.name AND o.function_id > mine.last
        ORDER BY o.function_id, o.workflow_uuid LIMIT 1),
       mine.last
FROM mine
"""


FENCE_SQL = f"""
CREATE TABLE IF NOT EXISTS killpoint_fenced (
  id       bigserial PRIMARY KEY,
  workflow text NOT NULL,
  run_id   text NOT NULL,
  inc      text NOT NULL,
  at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION killpoint_dbos_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  writer text := killpoint_writer();
  root text := NEW.workflow_uuid;
  up text := NEW.parent_workflow_id;
  hops int := 0;
BEGIN
  IF OLD.status IS DISTINCT FROM 'ENQUEUED' OR NEW.status IS DISTINCT FROM 'PENDING'
     OR writer IS NULL OR writer !~ '#[0-9]+$' THEN
    RETURN NEW;
  END IF;
  WHILE up IS NOT NULL AND hops < 1000 LOOP
    root := up;
    SELECT parent_workflow_id INTO up FROM {SCHEMA}.workflow_status WHERE workflow_uuid = root;
    hops := hops + 1;
  END LOOP;
  IF regexp_replace(writer, '#[0-9]+$', '') = root
     OR NOT EXISTS (SELECT 1 FROM killpoint_barrier WHERE run_id = root) THEN
    RETURN NEW;
  END IF;
  INSERT INTO killpoint_fenced (workflow, run_id, inc) VALUES (NEW.workflow_uuid, root, writer);
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS killpoint_fence_trigger ON {SCHEMA}.workflow_status;
CREATE TRIGGER killpoint_fence_trigger BEFORE UPDATE ON {SCHEMA}.workflow_status
  FOR EACH ROW EXECUTE FUNCTION killpoint_dbos_fence();
"""
"""The fence between concurrent runs (point 7 of the module doc): a claim of one active run's workflow by
another run's incarnation is skipped (the row is left as it was) and logged."""

UNFENCE_SQL = f"""
DROP TRIGGER IF EXISTS killpoint_fence_trigger ON {SCHEMA}.workflow_status;
DROP FUNCTION IF EXISTS killpoint_dbos_fence();
"""


class DbosAdapter(FrameworkRecords):
    """DBOS Transact (Python) with its system database on the run database."""

    name = "dbos"
    system_schemas = (SCHEMA,)  # created by name: on a --dsn database the session gets a database of its own
    concurrent_runs = True  # behind the fence (module doc, point 7)
    serial_reason = ""
    hold = Hold(table=f"{SCHEMA}.operation_outputs", run_column="workflow_uuid", when="TG_OP = 'INSERT'",
                seq="(r->>'function_id')::bigint", cursor="r->>'function_name'", status="'running'")

    def no_checkpoint_hint(self, commits: int) -> str:
        return ("the workflow recorded no step output (operation_outputs) while a step was in flight: are its "
                "steps @DBOS.step functions called from the @DBOS.workflow?")

    def _row(self, conn: psycopg.Connection, run_id: str) -> tuple[str | None, str | None, str | None] | None:
        row: Any = fetch_one(conn, f"SELECT status, output, executor_id FROM {SCHEMA}.workflow_status "
                             "WHERE workflow_uuid = %s", (run_id,))
        return (row[0], row[1], row[2]) if row else None

    def recorded(self, conn: psycopg.Connection, besides: list[str], limit: int = 5) -> list[str]:
        """The top-level workflows DBOS holds besides `besides` (one started without `SetWorkflowID(run id)`
        gets an id of DBOS's own)."""
        return [r[0] for r in fetch_all(conn, f"SELECT workflow_uuid FROM {SCHEMA}.workflow_status WHERE "
                                              "parent_workflow_id IS NULL AND NOT (workflow_uuid = ANY(%s)) "
                                              "ORDER BY workflow_uuid LIMIT %s", (besides, limit))]

    def status(self, conn: psycopg.Connection, run_id: str) -> str | None:
        row = self._row(conn, run_id)
        if row is None:
            return None
        return "done" if row[0] == "SUCCESS" else "failed" if row[0] in FAILED else "running"

    def cursor(self, conn: psycopg.Connection, run_id: str) -> str | None:
        return self.progress(conn, run_id)[0]

    def progress(self, conn: psycopg.Connection, run_id: str) -> tuple[str | None, int | None]:
        row: Any = fetch_one(conn, CURSOR_SQL, {"run": run_id})
        return (row[0], int(row[1])) if row else (None, None)

    def fence(self, conn: psycopg.Connection) -> None:
        """Keep concurrent runs' workflows apart on DBOS's shared queue (module doc, point 7); idempotent.
        Needs DBOS's tables, `killpoint_barrier` (harness/env/sqlbarrier.py `install`) and `killpoint_writer()`,
        the writing incarnation as the audit trail names it (harness/env/audit.py `install`)."""
        conn.execute(FENCE_SQL)  # type: ignore[arg-type]
        conn.commit()

    def unfence(self, conn: psycopg.Connection) -> None:
        conn.execute(UNFENCE_SQL)  # type: ignore[arg-type]
        conn.commit()

    def retire(self, conn: psycopg.Connection, run_id: str) -> int:
        if not table_exists(conn, f"{SCHEMA}.workflow_status"):
            return 0  # the worker never got as far as creating DBOS's tables
        return conn.execute(RETIRE_SQL, {"run": run_id, "finished": list(FINISHED)}).rowcount

    def final(self, conn: psycopg.Connection, run_id: str) -> tuple[dict | None, str | None]:
        row = self._row(conn, run_id)
        if row is None:
            return None, None
        status = self.status(conn, run_id)
        record = {"run_id": run_id, "seq": self.progress(conn, run_id)[1], "cursor": "done" if status == "done" else None,
                  "status": status, "state": {"status": row[0], "output": row[1]}, "executor_id": row[2]}
        return record, None
