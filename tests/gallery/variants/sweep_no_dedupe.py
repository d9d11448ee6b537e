"""A sweeper without the dedupe job id: every sweep queues each stalled run under a fresh job id, so two
sweepers that find the same run queue it twice (the reference uses `resume-<run_id>`, ON CONFLICT DO
NOTHING).

A `sweep` function the stalled-sweep test races in place of the reference one; it patches nothing, unlike
the mutant ``tests.gallery.mutants.sweeper_no_dedupe`` (a step module that swaps the runtime's enqueue)."""

from __future__ import annotations

import uuid

import psycopg

from killpoint.reference_agent.queue import RESUME
from killpoint.reference_agent.sweeper import find_stalled


def sweep(conn: psycopg.Connection, stale_seconds: float) -> list[str]:
    queued = []
    for run_id in find_stalled(conn, stale_seconds):
        conn.execute("INSERT INTO jobs (id, run_id, kind) VALUES (%s, %s, %s)",
                     (f"job-{uuid.uuid4().hex}", run_id, RESUME))  # BUG: no dedupe id
        queued.append(run_id)
    return queued
