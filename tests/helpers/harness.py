"""Helpers for the harness core's tests: a Session on the test Postgres, with the agent (or a gallery
agent) preloaded. (The CLI as a subprocess is ``tests.helpers.sandbox``.)

Nothing here sleeps to synchronise: waits poll a condition with a deadline (``tests.helpers.agents.wait_for``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env.environment import Environment
from killpoint.env.postgres import PostgresHandle
from killpoint.env.stepmodule import DEFAULT_STEPS, load
from killpoint.reference_agent.schema import ensure_schema
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.run.trial import Session
from tests.helpers import pythonpath

BROKEN_AGENT = "tests.gallery.variants.no_email_key"
"""The invoice agent with no idempotency key on its email: `email:effect.applied:kill` sends it twice."""


@contextlib.contextmanager
def harness_session(pg_server: PostgresHandle, run_dir: Path, db: str, *, spawn: str = "fork",
                    steps: str = DEFAULT_STEPS, options: RunOptions | None = None) -> Iterator[Session]:
    """A Session on a fresh database of the test server, with the agent `steps` preloaded.

    The environment (fake services, barrier, launcher) is the one the CLI builds; only the Postgres is
    the test session's (`--postgres dsn`), which saves a server start per module.
    """
    dsn = pg_server.create_database(db)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", pythonpath())  # fork server and workers import `tests.gallery` too
        agent = load(steps)
        run_dir.mkdir(parents=True, exist_ok=True)
        history = History(run_dir / "history.jsonl")
        try:
            with Environment(postgres="dsn", dsn=dsn, allow_any_dsn=True, spawn=spawn, preload=[agent.module],
                             run_dir=run_dir, schema=ensure_schema) as env:
                yield Session(env, history, agent, options or RunOptions(grace=5.0))
        finally:
            history.close()
            with contextlib.suppress(Exception):
                pg_server.drop_database(db)


def run_events(events: list[dict], run_id: str) -> list[dict]:
    """The control events of one run (service-side evidence left out), in journal order."""
    return [e for e in events if e.get("run_id") == run_id and e["type"] not in ("attempt", "effect", "model.request")]
