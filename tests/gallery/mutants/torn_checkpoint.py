"""Mutant: a checkpoint saved in two statements outside one transaction. The payload is written first and
the ``seq``/``status`` columns after it, each committing on its own, so a crash between the two leaves a torn
checkpoint: a payload that says one thing and columns (read by the guard and the sweeper) that say another."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from killpoint.reference_agent.checkpoint import Checkpoint
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from killpoint.reference_agent.store import CheckpointStore, Fenced, InTxn, PointHook

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

INSERT = """
INSERT INTO checkpoints (run_id, seq, status, data, updated_at) VALUES (%(run_id)s, %(seq)s, %(status)s, %(data)s, now())
ON CONFLICT (run_id) DO UPDATE SET data = EXCLUDED.data, updated_at = now() WHERE checkpoints.seq < EXCLUDED.seq
"""
COLUMNS = "UPDATE checkpoints SET seq = %(seq)s, status = %(status)s WHERE run_id = %(run_id)s"


def _save(self: CheckpointStore, cp: Checkpoint, in_txn: InTxn | None = None, point: PointHook | None = None) -> None:
    params = {"run_id": cp.run_id, "seq": cp.seq, "status": cp.status, "data": Jsonb(cp.to_json())}
    with self.conn.cursor() as cur:  # BUG: autocommit, no transaction: each statement commits by itself
        cur.execute(INSERT, params)
        if cur.rowcount != 1:
            raise Fenced(cp.run_id, cp.seq, None)
        if in_txn is not None:
            in_txn(cur)
        if point is not None:
            point("checkpoint.writing")
        cur.execute(COLUMNS, params)  # the second half of the checkpoint, in a statement of its own
    if point is not None:
        point("checkpoint.committed")


CheckpointStore.save = _save  # type: ignore[method-assign]
