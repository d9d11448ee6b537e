"""A short per-run lease: who may work on a run, until when.

A worker acquires the lease before it touches a run and renews it before every later step (taking it was
the first step's renewal: no step or kill point comes between them). A live lease held by another owner means someone
else is working on the run: the worker leaves the run alone. Expiry is judged by the database clock
(``now()``), so workers on machines with skewed clocks agree. The harness simulates the passage of time for
a dead worker with ``UPDATE leases SET expires_at = now() - interval '1 second' WHERE run_id = %s``.
"""

from __future__ import annotations

import psycopg

ACQUIRE = """
INSERT INTO leases AS l (run_id, owner, expires_at)
VALUES (%(run_id)s, %(owner)s, now() + %(seconds)s * interval '1 second')
ON CONFLICT (run_id) DO UPDATE
  SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
  WHERE l.owner = EXCLUDED.owner OR l.expires_at <= now()
RETURNING owner
"""

RENEW = """
UPDATE leases SET expires_at = now() + %(seconds)s * interval '1 second'
WHERE run_id = %(run_id)s AND owner = %(owner)s
"""


class LeaseBusy(Exception):
    """Another owner holds a live lease on the run."""

    def __init__(self, run_id: str, holder: str | None, expires_at: object = None) -> None:
        super().__init__(f"run {run_id!r}: lease held by {holder!r} until {expires_at}; leaving it alone")
        self.run_id = run_id
        self.holder = holder


class LeaseLost(Exception):
    """Our lease was taken over by another owner while we worked (it had expired)."""

    def __init__(self, run_id: str, owner: str) -> None:
        super().__init__(f"run {run_id!r}: lease of {owner!r} was taken over; stopping")
        self.run_id = run_id


class Lease:
    """The lease of ``owner`` on ``run_id``, ``seconds`` long, over an autocommit connection."""

    def __init__(self, conn: psycopg.Connection, run_id: str, owner: str, seconds: float) -> None:
        self.conn = conn
        self.run_id = run_id
        self.owner = owner
        self.seconds = seconds

    def _params(self) -> dict[str, object]:
        return {"run_id": self.run_id, "owner": self.owner, "seconds": self.seconds}

    def acquire(self) -> None:
        """Take the lease if it is free, expired or already ours; else raise :class:`LeaseBusy`."""
        if self.conn.execute(ACQUIRE, self._params()).fetchone() is None:
            row = self.conn.execute(
                "SELECT owner, expires_at FROM leases WHERE run_id = %s", (self.run_id,)).fetchone()
            raise LeaseBusy(self.run_id, *(row or (None, None)))

    def renew(self) -> None:
        """Extend the lease; raise :class:`LeaseLost` if it is no longer ours."""
        if self.conn.execute(RENEW, self._params()).rowcount != 1:
            raise LeaseLost(self.run_id, self.owner)

    def release(self) -> None:
        """Give the lease up (no effect if another owner holds it now)."""
        self.conn.execute("DELETE FROM leases WHERE run_id = %s AND owner = %s", (self.run_id, self.owner))
