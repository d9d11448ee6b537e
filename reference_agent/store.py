"""Checkpoint store: load, and save with the monotonic guard, atomically.

``save`` runs one transaction: the guarded upsert, then the step's own in-transaction write (if any), then
COMMIT. When the guard refuses the write (the row already holds this seq or a newer one: another worker has
moved the run on), the transaction is rolled back, the step's own write with it, and :class:`Fenced` is
raised: the writer has been fenced and must stop at once, without further effects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from .checkpoint import Checkpoint

InTxn = Callable[[psycopg.Cursor], None]
"""A write a step asks to commit in the checkpoint's own transaction (exactly once by construction)."""

PointHook = Callable[[str], None]
"""Called with ``checkpoint.writing`` (before COMMIT) and ``checkpoint.committed`` (after)."""

UPSERT = """
INSERT INTO checkpoints (run_id, seq, status, data, updated_at)
VALUES (%(run_id)s, %(seq)s, %(status)s, %(data)s, now())
ON CONFLICT (run_id) DO UPDATE
  SET seq = EXCLUDED.seq, status = EXCLUDED.status, data = EXCLUDED.data, updated_at = now()
  WHERE checkpoints.seq < EXCLUDED.seq
"""


class Fenced(Exception):
    """The monotonic guard refused a checkpoint write: a newer checkpoint is already stored."""

    def __init__(self, run_id: str, seq: int, stored_seq: int | None) -> None:
        super().__init__(
            f"run {run_id!r}: checkpoint seq {seq} refused, stored seq is {stored_seq}; "
            "another worker has moved this run on (fenced)")
        self.run_id = run_id
        self.seq = seq
        self.stored_seq = stored_seq


class CheckpointStore:
    """Checkpoints of runs in the ``checkpoints`` table, over one autocommit connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def load(self, run_id: str) -> Any | None:
        """The stored payload of ``run_id`` as parsed JSON (not yet validated), or None if there is none."""
        row = self.conn.execute("SELECT data FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone()
        return None if row is None else row[0]

    def save(self, cp: Checkpoint, in_txn: InTxn | None = None, point: PointHook | None = None) -> None:
        """Write ``cp`` if its seq is above the stored one, with ``in_txn`` in the same transaction.

        Raises :class:`Fenced` (and commits nothing) when the guard refuses the write.
        """
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute(UPSERT, {"run_id": cp.run_id, "seq": cp.seq, "status": cp.status,
                                 "data": Jsonb(cp.to_json())})
            if cur.rowcount != 1:
                stored = cur.execute(
                    "SELECT seq FROM checkpoints WHERE run_id = %s", (cp.run_id,)).fetchone()
                raise Fenced(cp.run_id, cp.seq, None if stored is None else stored[0])
            if in_txn is not None:
                in_txn(cur)
            if point is not None:
                point("checkpoint.writing")
        if point is not None:
            point("checkpoint.committed")
