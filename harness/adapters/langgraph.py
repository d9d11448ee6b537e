"""LangGraph's PostgresSaver as a run's records: the checkpointer's `checkpoints` table by thread id.

A killpoint run id is the graph's `thread_id` (the worker passes `{"configurable": {"thread_id": run_id}}`);
node names are the steps. Read without importing LangGraph, from the rows it writes:

1. The run's latest checkpoint is its row with the greatest `checkpoint_id` (uuid6, ordered by time) in
   the root namespace (`checkpoint_ns = ''`).
2. The nodes still to run are the `branch:to:NODE` keys of that checkpoint's `channel_values` (LangGraph
   keeps a trigger channel per scheduled node and drops it once the node has run). The first of them,
   by name, is the cursor: the node in progress, which a request sent now belongs to and which the
   checkpoint being committed now records.
3. Status: no row, None; a `loop` checkpoint with no node left, "done"; otherwise "running".
4. Checkpoint points: the commit of each new `loop` checkpoint (an INSERT), held by the SQL barrier; its
   seq (in the audit trail, and the marker that moves at each commit) is LangGraph's superstep number,
   `metadata.step`, which grows by one per checkpoint.
5. The final record is the latest checkpoint's inline channel values (values LangGraph keeps as blobs,
   and its trigger channels, are left out), as `state`.
"""

from __future__ import annotations

from typing import Any

import psycopg

from killpoint.adapters.base import FrameworkRecords, Hold

BRANCH = "branch:to:"

LATEST_SQL = """
SELECT checkpoint->'channel_values', metadata->>'source',
       (SELECT max((c.metadata->>'step')::bigint) FROM checkpoints c
        WHERE c.thread_id = %(run)s AND c.checkpoint_ns = '' AND c.metadata->>'source' = 'loop')
FROM checkpoints WHERE thread_id = %(run)s AND checkpoint_ns = ''
ORDER BY checkpoint_id DESC LIMIT 1
"""


class LangGraphAdapter(FrameworkRecords):
    """LangGraph (langgraph-checkpoint-postgres) on the run database's search path."""

    name = "langgraph"
    concurrent_runs = True
    system_schemas: tuple[str, ...] = ()  # its tables go where the search path says
    serial_reason = ""
    hold = Hold(table="checkpoints", run_column="thread_id",
                when="TG_OP = 'INSERT' AND r->'metadata'->>'source' = 'loop' "
                     "AND coalesce(r->>'checkpoint_ns', '') = ''",
                seq="(r->'metadata'->>'step')::bigint",
                cursor=f"coalesce((SELECT substr(min(k), {len(BRANCH) + 1}) FROM "
                       f"jsonb_object_keys(r->'checkpoint'->'channel_values') AS k WHERE k LIKE '{BRANCH}%'), 'done')",
                status=f"CASE WHEN EXISTS (SELECT 1 FROM jsonb_object_keys(r->'checkpoint'->'channel_values') AS k "
                       f"WHERE k LIKE '{BRANCH}%') THEN 'running' ELSE 'done' END")

    def _latest(self, conn: psycopg.Connection, run_id: str) -> tuple[dict, str | None, int] | None:
        row: Any = conn.execute(LATEST_SQL, {"run": run_id}).fetchone()
        return (row[0] or {}, row[1], -1 if row[2] is None else int(row[2])) if row else None

    @staticmethod
    def _next(values: dict) -> list[str]:
        return sorted(k[len(BRANCH):] for k in values if k.startswith(BRANCH))

    def status(self, conn: psycopg.Connection, run_id: str) -> str | None:
        latest = self._latest(conn, run_id)
        if latest is None:
            return None
        values, source, _ = latest
        return "done" if source == "loop" and not self._next(values) else "running"

    def cursor(self, conn: psycopg.Connection, run_id: str) -> str | None:
        return self.progress(conn, run_id)[0]

    def progress(self, conn: psycopg.Connection, run_id: str) -> tuple[str | None, int | None]:
        latest = self._latest(conn, run_id)
        if latest is None:
            return None, None
        pending = self._next(latest[0])
        return (pending[0] if pending else None), latest[2]

    def final(self, conn: psycopg.Connection, run_id: str) -> tuple[dict | None, str | None]:
        latest = self._latest(conn, run_id)
        if latest is None:
            return None, None
        values, source, count = latest
        pending = self._next(values)
        done = source == "loop" and not pending
        record = {"run_id": run_id, "seq": count, "cursor": "done" if done else (pending[0] if pending else None),
                  "status": "done" if done else "running",
                  "state": {k: v for k, v in values.items() if not k.startswith(BRANCH)}}
        return record, None
