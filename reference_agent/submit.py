"""Starting runs as the reference runtime's application does: each run's first checkpoint (seq 0, at the
step module's start, its initial state from the parameters) and a resume job a queue worker will take."""

from __future__ import annotations

import psycopg

from .checkpoint import RUNNING, Checkpoint, now_iso
from .queue import enqueue_resume
from .step_module import load_step_module
from .store import CheckpointStore


def submit(conn: psycopg.Connection, module: str, run_ids: list[str], params: dict) -> None:
    """Create every run of `run_ids` for the step module `module` with `params`, and queue it."""
    steps = load_step_module(module)
    store = CheckpointStore(conn)
    for run_id in run_ids:
        store.save(Checkpoint(run_id=run_id, seq=0, version=steps.state_version, cursor=steps.start,
                              status=RUNNING, state=steps.initial_state(dict(params)), window=[],
                              cost_usd=0.0, updated_at=now_iso()))
        enqueue_resume(conn, run_id)
