"""Retention: checkpoints of finished runs are deleted once they are older than a given age.

Only terminal runs (status ``done`` or ``failed``) are touched; a running or paused run keeps its checkpoint
however old it is (the sweeper resumes it).
"""

from __future__ import annotations

import psycopg

from .checkpoint import TERMINAL_STATUSES

DELETE_OLD = """
DELETE FROM checkpoints
WHERE status = ANY(%(terminal)s) AND updated_at < now() - %(age)s * interval '1 second'
RETURNING run_id
"""


def sweep_retention(conn: psycopg.Connection, older_than_seconds: float) -> list[str]:
    """Delete checkpoints (and leftover leases) of terminal runs not updated for ``older_than_seconds``;
    return the run ids deleted."""
    with conn.transaction():
        run_ids = [r[0] for r in conn.execute(
            DELETE_OLD, {"terminal": list(TERMINAL_STATUSES), "age": older_than_seconds}).fetchall()]
        conn.execute("DELETE FROM leases WHERE run_id = ANY(%s)", (run_ids,))
    return sorted(run_ids)
