"""The sweeper: finds runs that nobody is moving and queues one resume job for each.

A run is stalled when it is ``running`` and either its checkpoint has not moved for ``stale_seconds`` or its
lease has expired (its worker died or froze), or when it is ``paused`` (drained) and nobody holds a live
lease on it. Each gets the job ``resume-<run_id>``, inserted with ``ON CONFLICT DO NOTHING``: two sweepers
running at once queue it once.

``python -m killpoint.reference_agent.sweeper [--stale-seconds S] [--limit N] [--retention-seconds R]`` sweeps once
(the database from ``DATABASE_URL``), prints the run ids it queued, one a line, and exits 0; with
``--retention-seconds`` it also deletes checkpoints of terminal runs older than R seconds.
"""

from __future__ import annotations

import argparse
import os
import sys

import psycopg

from .queue import enqueue_resume
from .retention import sweep_retention
from .schema import ensure_schema

STALLED = """
SELECT c.run_id FROM checkpoints c LEFT JOIN leases l ON l.run_id = c.run_id
WHERE (c.status = 'running'
       AND (c.updated_at < now() - %(stale)s * interval '1 second' OR l.expires_at <= now()))
   OR (c.status = 'paused' AND (l.run_id IS NULL OR l.expires_at <= now()))
ORDER BY c.updated_at, c.run_id
LIMIT %(limit)s
"""


def find_stalled(conn: psycopg.Connection, stale_seconds: float = 300.0, limit: int = 100) -> list[str]:
    return [r[0] for r in conn.execute(STALLED, {"stale": stale_seconds, "limit": limit}).fetchall()]


def sweep_stalled(conn: psycopg.Connection, stale_seconds: float = 300.0, limit: int = 100) -> list[str]:
    """Queue a resume job for every stalled run; return the run ids this call queued (not those already
    queued by someone else)."""
    return [run_id for run_id in find_stalled(conn, stale_seconds, limit) if enqueue_resume(conn, run_id)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m killpoint.reference_agent.sweeper", description=__doc__.split("\n")[0])
    parser.add_argument("--stale-seconds", type=float, default=300.0)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--retention-seconds", type=float, default=None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    dsn = os.environ.get("DATABASE_URL")
    if not dsn:
        print("sweeper: DATABASE_URL is not set", file=sys.stderr)
        return 2
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_schema(conn)
        for run_id in sweep_stalled(conn, args.stale_seconds, args.limit):
            print(run_id, flush=True)
        if args.retention_seconds is not None:
            deleted = sweep_retention(conn, args.retention_seconds)
            print(f"retention: deleted {len(deleted)} checkpoints", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
