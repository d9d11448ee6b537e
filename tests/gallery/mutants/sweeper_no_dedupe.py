"""Mutant: a sweeper without the dedupe job id. Each sweep queues a resume job under a fresh id, so two
sweepers that find the same stalled run queue it twice, and two queue workers go after one run."""

from __future__ import annotations

import uuid

import psycopg

from killpoint.reference_agent import queue, sweeper
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _enqueue(conn: psycopg.Connection, run_id: str) -> bool:
    job_id = f"resume-{run_id}-{uuid.uuid4().hex[:8]}"  # BUG: a fresh job id per sweep: no dedupe
    conn.execute("INSERT INTO jobs (id, run_id, kind) VALUES (%s, %s, %s)", (job_id, run_id, queue.RESUME))
    return True


queue.enqueue_resume = _enqueue
sweeper.enqueue_resume = _enqueue
