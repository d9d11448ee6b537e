"""Our own dedupe for a downstream without idempotency support: ``was_done`` / ``mark_done``.

The pattern is ``if was_done(key): skip; effect(); mark_done(key)``. It narrows the window of a duplicate
effect without closing it: a crash between the effect and ``mark_done`` repeats the effect on resume. Only
the webhook variant agent uses it, as the harness's negative control.
"""

from __future__ import annotations

import psycopg


class DoneKeys:
    """Keys of effects already performed, in the ``done_keys`` table (autocommit connection)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def was_done(self, key: str) -> bool:
        return self.conn.execute("SELECT 1 FROM done_keys WHERE key = %s", (key,)).fetchone() is not None

    def mark_done(self, key: str) -> None:
        self.conn.execute("INSERT INTO done_keys (key) VALUES (%s) ON CONFLICT (key) DO NOTHING", (key,))
