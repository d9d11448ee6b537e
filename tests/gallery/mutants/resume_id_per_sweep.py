"""Mutant: the resume job's id made unique per sweep (a timestamp appended) instead of one per run. The
insert keeps its ON CONFLICT DO NOTHING, which now never fires: two sweepers that find the same stalled run
queue it twice, and two queue workers go after one run. The runtime's sweeper runs in the harness's process
(stalled-sweep races two of them there), so the harness must import the step module first for this
mutation to be in force where it matters."""

from __future__ import annotations

import time

from killpoint.reference_agent import queue
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _job_id(run_id: str) -> str:
    return f"resume-{run_id}-{time.monotonic_ns()}"  # BUG: one id per sweep, not per run: no dedupe


queue.resume_job_id = _job_id
