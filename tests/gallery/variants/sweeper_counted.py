"""A correct agent that looks like the sweeper mutants: at import it replaces the runtime's
`enqueue_resume` (in `queue` and in `sweeper`, as `tests.gallery.mutants.sweeper_no_dedupe` does) with a
wrapper that counts the resume jobs it queued and calls the original, whose job id (`resume-<run_id>`,
ON CONFLICT DO NOTHING) still dedupes two sweepers' finds. stalled-sweep must pass it."""

from __future__ import annotations

import psycopg

from killpoint.reference_agent import queue, sweeper
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "QUEUED", "START", "STATE_VERSION", "STEPS", "initial_state"]

QUEUED: list[str] = []
_original = queue.enqueue_resume


def _counted(conn: psycopg.Connection, run_id: str) -> bool:
    queued = _original(conn, run_id)
    if queued:
        QUEUED.append(run_id)
    return queued


queue.enqueue_resume = _counted
sweeper.enqueue_resume = _counted
