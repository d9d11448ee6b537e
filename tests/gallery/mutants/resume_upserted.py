"""Mutant: the resume job upserted (ON CONFLICT DO UPDATE) instead of inserted once (ON CONFLICT DO NOTHING).
Each sweeper that finds a stalled run "queues" it, the second re-queueing the first's job, or queueing it
again once a queue worker has taken it: the run is queued by two sweepers and may be resumed twice. The
runtime's sweeper runs in the harness's process (stalled-sweep races two of them there), so the harness
must import the step module first for this mutation to be in force where it matters."""

from __future__ import annotations

import psycopg

from killpoint.reference_agent import queue, sweeper
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _enqueue(conn: psycopg.Connection, run_id: str) -> bool:
    row = conn.execute(  # BUG: DO UPDATE, not DO NOTHING: every sweep that finds the run says it queued it
        "INSERT INTO jobs (id, run_id, kind) VALUES (%s, %s, %s) ON CONFLICT (id) DO UPDATE SET state = 'queued' "
        "RETURNING id", (queue.resume_job_id(run_id), run_id, queue.RESUME)).fetchone()
    return row is not None


queue.enqueue_resume = _enqueue
sweeper.enqueue_resume = _enqueue
