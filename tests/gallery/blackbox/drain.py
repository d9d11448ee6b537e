"""What the SIGTERM gallery workers share: the outbox invoice run (``outbox.py``, its relay marking rows
sent) with a drain: on SIGTERM the worker finishes the step in flight, writes a ``paused`` checkpoint and
exits 0, as killpoint's exit-code convention asks (``--exit-codes killpoint``). The workers differ only in
what a signal does to them (``run(policy)``):

- ``"cold"``: the first SIGTERM drains; a second one is an operator's "stop now" (Celery's and Uvicorn's cold
  shutdown): exit 1 at once. Correct: a deploy sends one SIGTERM per process.
- ``"default"``: the first SIGTERM drains and puts the default action back, so a second one ends the
  process (the "press Ctrl-C again to force" idiom). Correct, for the same reason.
- ``"none"``: no drain: SIGTERM ends the process with exit 1 in the middle of its step. A bug: a deploy
  cuts a step short and the worker leaves no paused checkpoint.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tests.gallery.blackbox import outbox

_draining: list[int] = []


def _handler(policy: str) -> Any:
    def handle(signum: int, _frame: Any) -> None:
        if policy == "none" or (policy == "cold" and _draining):
            os._exit(1)
        _draining.append(signum)
        if policy == "default":
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return handle


def pause(conn: psycopg.Connection, data: dict) -> None:
    """The drain's checkpoint: the same cursor, status ``paused``, seq + 1 (compare-and-set, as `advance`)."""
    data = {**data, "seq": data["seq"] + 1, "status": "paused"}
    written = conn.execute("UPDATE checkpoints SET seq = %s, status = 'paused', data = %s, updated_at = now() "
                           "WHERE run_id = %s AND seq = %s",
                           (data["seq"], Jsonb(data), data["run_id"], data["seq"] - 1)).rowcount
    if written != 1:
        raise outbox.Fenced(data["run_id"])


def main(run_id: str) -> int:
    with outbox.connect() as conn:
        outbox.ensure_outbox(conn)
        for n, url_var, path, body, key in outbox.rows(conn, run_id, unsent_only=True):
            outbox.send(url_var, path, body, key)
            outbox.mark_sent(conn, run_id, n)
        data = outbox.load(conn, run_id)
        while data["cursor"] != "done":
            if _draining:
                pause(conn, data)
                return 0
            step = data["cursor"]
            with conn.transaction():
                row = outbox.enqueue(conn, run_id, step) if step in outbox.EFFECTS else None
                data = outbox.advance(conn, data, {**data["state"], step: True})
            if row is not None:
                n, url_var, path, body, key = row
                outbox.send(url_var, path, body, key, step=step)
                outbox.mark_sent(conn, run_id, n)
    return 0


def run(policy: str) -> None:
    signal.signal(signal.SIGTERM, _handler(policy))
    sys.exit(outbox.run(main))
