"""A generic black-box worker that never waits on a row lock: ``python skiplocked_worker.py RUN_ID``.

It imports nothing of killpoint and keeps its progress in the contract's ``checkpoints`` table
(``run_id, seq, status, data`` with a ``cursor``), as a queue-style worker does: each step is one
transaction that claims the run's row with ``FOR UPDATE SKIP LOCKED``, runs the step and writes the next
checkpoint. A row another worker holds is skipped, not waited on: the worker polls again until the row is
free (``--on-locked wait``, the default) or leaves at once (``--on-locked exit``, exit 0). Either way its
session never shows in ``pg_locks`` as waiting on the other worker, which is the case a harness that
thaws a frozen worker only when its successor waits on its locks would never see.

Steps: ``plan``, ``email`` (one email to the fake mailer, keyed ``<run_id>:email``, with the
``Killpoint-Step`` header), ``record``; then the cursor is ``done`` and the worker exits 0.

``--probe FILE`` appends, at start, one JSON line of what the worker's database session sees:
``search_path``, ``application_name``, ``killpoint.inc`` and ``statement_timeout``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

import psycopg
from psycopg.types.json import Jsonb

STEPS = ["plan", "email", "record"]
POLL_SECONDS = 0.02  # the worker's own retry pause while another worker holds the run


def send_email(run_id: str) -> str:
    body = json.dumps({"to": "ada@example.com", "template": "invoice", "data": {"run": run_id}}).encode()
    req = urllib.request.Request(os.environ["MAILER_URL"] + "/v1/emails", data=body, method="POST", headers={
        "Content-Type": "application/json", "Idempotency-Key": f"{run_id}:email", "Killpoint-Step": "email"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["id"]


def run_step(run_id: str, cursor: str, state: dict) -> dict:
    if cursor == "email":
        return {**state, "email_id": send_email(run_id)}
    return {**state, cursor: True}


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: skiplocked_worker.py RUN_ID [--on-locked wait|exit] [--probe FILE]", file=sys.stderr)
        return 2
    run_id = argv[0]
    leave = argv[argv.index("--on-locked") + 1] == "exit" if "--on-locked" in argv else False
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        if "--probe" in argv:
            seen = conn.execute("SELECT current_setting('search_path'), current_setting('application_name'), "
                                "current_setting('killpoint.inc', true), current_setting('statement_timeout')"
                                ).fetchone()
            with open(argv[argv.index("--probe") + 1], "a", encoding="utf-8") as out:
                out.write(json.dumps(dict(zip(["search_path", "application_name", "killpoint_inc",
                                               "statement_timeout"], seen or (), strict=False))) + "\n")
        first = {"run_id": run_id, "seq": 0, "cursor": STEPS[0], "status": "running", "state": {}}
        # only a new run inserts (an INSERT, even ON CONFLICT DO NOTHING, would wait on a row being updated)
        if conn.execute("SELECT 1 FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone() is None:
            conn.execute("INSERT INTO checkpoints (run_id, seq, status, data) VALUES (%s, 0, 'running', %s) "
                         "ON CONFLICT (run_id) DO NOTHING", (run_id, Jsonb(first)))
        while True:
            with conn.transaction():
                row = conn.execute("SELECT data FROM checkpoints WHERE run_id = %s FOR UPDATE SKIP LOCKED",
                                   (run_id,)).fetchone()
                if row is not None:
                    data = row[0]
                    if data["cursor"] == "done":
                        return 0
                    state = run_step(run_id, data["cursor"], data["state"])
                    nxt = STEPS[STEPS.index(data["cursor"]) + 1] if data["cursor"] != STEPS[-1] else "done"
                    data = {**data, "seq": data["seq"] + 1, "cursor": nxt, "state": state,
                            "status": "done" if nxt == "done" else "running"}
                    conn.execute("UPDATE checkpoints SET seq = %s, status = %s, data = %s, updated_at = now() "
                                 "WHERE run_id = %s", (data["seq"], data["status"], Jsonb(data), run_id))
                    continue
            if leave:
                print(f"skiplocked_worker: run {run_id} is held by another worker", file=sys.stderr)
                return 0
            time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
