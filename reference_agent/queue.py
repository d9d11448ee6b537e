"""Resume jobs in the Postgres ``jobs`` table.

A resume job has the id ``resume-<run_id>`` and is inserted with ``ON CONFLICT DO NOTHING``, so however many
sweepers find the same stalled run at once, it is queued once. A worker claims the oldest queued job with
``FOR UPDATE SKIP LOCKED`` (two workers never claim the same job) and consumes it in the same statement: a
worker that dies while running the job leaves the run to the sweeper, which queues it again once the run's
lease has expired or its checkpoint has gone stale.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

RESUME = "resume"


def resume_job_id(run_id: str) -> str:
    return f"resume-{run_id}"


@dataclass(frozen=True)
class Job:
    id: str
    run_id: str
    kind: str


def enqueue_resume(conn: psycopg.Connection, run_id: str) -> bool:
    """Queue a resume job for ``run_id``; False if one is already there."""
    row = conn.execute(
        "INSERT INTO jobs (id, run_id, kind) VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
        (resume_job_id(run_id), run_id, RESUME)).fetchone()
    return row is not None


CLAIM = """
DELETE FROM jobs WHERE id = (
  SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id, run_id, kind
"""


def claim(conn: psycopg.Connection) -> Job | None:
    """Take the oldest queued job off the queue, or None when there is none free."""
    row = conn.execute(CLAIM).fetchone()
    return None if row is None else Job(*row)
