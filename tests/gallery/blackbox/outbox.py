"""What the black-box gallery workers share: an invoice run of four steps kept in the contract's
``checkpoints`` table, whose effects go to the fake mailer and ledger with an idempotency key.

It imports nothing of killpoint: ``DATABASE_URL``, ``MAILER_URL`` and ``LEDGER_URL`` come from the worker's
environment (docs/frameworks.md, section 1). Steps: ``plan`` (no effect), ``email`` (one email to the
mailer), ``charge`` (one charge on the ledger), ``record`` (no effect); then the cursor is ``done``.

A request is keyed ``<run_id>.outbox.<n>`` (the outbox row's id, opaque to the services: it names no step)
and, when a step's own code sends it, carries the ``Killpoint-Step`` header naming that step. A generic
re-send (a relay replaying stored rows) has only what it stored: the path, the body and the key.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

STEPS = ["plan", "email", "charge", "record"]
EFFECTS: dict[str, tuple[str, str, dict[str, Any]]] = {  # step -> (service URL variable, path, body)
    "email": ("MAILER_URL", "/v1/emails", {"to": "ada@example.com", "template": "invoice", "data": {"n": 1}}),
    "charge": ("LEDGER_URL", "/v1/charges", {"account": "acct_1", "amount_cents": 1250, "currency": "usd"}),
}
OUTBOX_DDL = """CREATE TABLE IF NOT EXISTS gallery_outbox (
  run_id  text NOT NULL,
  n       int  NOT NULL,
  url_var text NOT NULL,
  path    text NOT NULL,
  body    jsonb NOT NULL,
  key     text NOT NULL,
  sent_at timestamptz,
  PRIMARY KEY (run_id, n))"""


def connect() -> psycopg.Connection:
    return psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)


def ensure_outbox(conn: psycopg.Connection) -> None:
    """Create the outbox table once (workers of several runs start at once: the lock orders their DDL)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('gallery_outbox'))")
        conn.execute(OUTBOX_DDL)


def send(url_var: str, path: str, body: dict, key: str, step: str | None = None) -> dict:
    """POST `body` with its idempotency key; `step` names the step in a ``Killpoint-Step`` header."""
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    if step is not None:
        headers["Killpoint-Step"] = step
    req = urllib.request.Request(os.environ[url_var] + path, data=json.dumps(body).encode(), method="POST",
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def load(conn: psycopg.Connection, run_id: str) -> dict:
    """The run's checkpoint, inserting the first one (seq 0, cursor ``plan``) for a new run."""
    first = {"run_id": run_id, "seq": 0, "cursor": STEPS[0], "status": "running", "state": {}}
    conn.execute("INSERT INTO checkpoints (run_id, seq, status, data) VALUES (%s, 0, 'running', %s) "
                 "ON CONFLICT (run_id) DO NOTHING", (run_id, Jsonb(first)))
    row = conn.execute("SELECT data FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    return row[0]


FENCED = 3
"""The exit code of a worker whose checkpoint write found the run moved on (docs/contracts.md: fenced)."""


class Fenced(Exception):
    """Another incarnation checkpointed this run since this one read it: this one must stop."""


def advance(conn: psycopg.Connection, data: dict, state: dict) -> dict:
    """Write the checkpoint after the step at `data`'s cursor (inside the caller's transaction, if any), only
    over the checkpoint it was read from (compare-and-set on seq): a thawed zombie's write after its successor
    moved the run on changes nothing and raises `Fenced`."""
    cursor = data["cursor"]
    nxt = STEPS[STEPS.index(cursor) + 1] if cursor != STEPS[-1] else "done"
    data = {**data, "seq": data["seq"] + 1, "cursor": nxt, "state": state,
            "status": "done" if nxt == "done" else "running"}
    written = conn.execute("UPDATE checkpoints SET seq = %s, status = %s, data = %s, updated_at = now() "
                           "WHERE run_id = %s AND seq = %s",
                           (data["seq"], data["status"], Jsonb(data), data["run_id"], data["seq"] - 1)).rowcount
    if written != 1:
        raise Fenced(data["run_id"])
    return data


def run(main: Callable[[str], int]) -> int:
    """`main(sys.argv[1])`, exiting `FENCED` where the run moved on under it."""
    try:
        return main(sys.argv[1])
    except Fenced:
        return FENCED


def key_of(run_id: str, n: int) -> str:
    return f"{run_id}.outbox.{n}"


def enqueue(conn: psycopg.Connection, run_id: str, step: str) -> tuple[int, str, str, dict, str]:
    """Write the outbox row of `step`'s effect (in the caller's transaction): (n, url_var, path, body, key)."""
    url_var, path, body = EFFECTS[step]
    n = STEPS.index(step)
    key = key_of(run_id, n)
    conn.execute("INSERT INTO gallery_outbox (run_id, n, url_var, path, body, key) VALUES (%s, %s, %s, %s, %s, %s) "
                 "ON CONFLICT (run_id, n) DO NOTHING", (run_id, n, url_var, path, Jsonb(body), key))
    return n, url_var, path, body, key


def rows(conn: psycopg.Connection, run_id: str, unsent_only: bool) -> list[tuple[int, str, str, dict, str]]:
    """The run's outbox rows in order (only those not marked sent, if `unsent_only`)."""
    sql = "SELECT n, url_var, path, body, key FROM gallery_outbox WHERE run_id = %s"
    sql += " AND sent_at IS NULL" if unsent_only else ""
    return [tuple(r) for r in conn.execute(sql + " ORDER BY n", (run_id,)).fetchall()]  # type: ignore[misc]


def mark_sent(conn: psycopg.Connection, run_id: str, n: int) -> None:
    conn.execute("UPDATE gallery_outbox SET sent_at = now() WHERE run_id = %s AND n = %s", (run_id, n))
