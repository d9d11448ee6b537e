"""Acme's billing agent as a black-box worker: ``python -m acme_billing.worker RUN_ID [--keyless]``.

It imports nothing of killpoint: killpoint runs it with
``--worker-cmd 'python -m acme_billing.worker {run_id}'`` and holds it where it can see it from outside
(the fakes' points, and the checkpoint write through a trigger). It keeps its progress in Postgres
(``DATABASE_URL``) in the seeds' shape, ``checkpoints(run_id, seq, status, data)``:

1. load the run's checkpoint, or write seq 0 (cursor ``review``, status ``running``) for a new run;
2. run the step at the cursor (``acme_billing.billing``, the same SDK code as ``acme_billing.steps``), with
   the key ``<run_id>:<cursor>`` for its effect (``--keyless``: the charge goes without one);
3. write the next checkpoint with seq + 1, guarded: a row with a higher or equal seq is never overwritten,
   and a refused write stops the worker (exit 4, fenced) before any further effect;
4. repeat until the cursor is ``done`` (exit 0).

The run's parameters come from ``KILLPOINT_PARAMS`` (JSON), as for a step module.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from acme_billing import billing

START = "review"
FENCED_EXIT = 4
UPSERT = """
INSERT INTO checkpoints (run_id, seq, status, data, updated_at) VALUES (%s, %s, %s, %s, now())
ON CONFLICT (run_id) DO UPDATE SET seq = EXCLUDED.seq, status = EXCLUDED.status, data = EXCLUDED.data,
    updated_at = now()
WHERE checkpoints.seq < EXCLUDED.seq
"""


def step(run_id: str, cursor: str, state: dict[str, Any], keyless: bool) -> tuple[str, dict[str, Any], float]:
    """Run the step at ``cursor``: (next cursor, state patch, cost)."""
    key = f"{run_id}:{cursor}"
    invoice = state["invoice"]
    if cursor == "review":
        verdict, usage = billing.review(run_id, invoice)
        return "charge", {"verdict": verdict}, billing.cost_usd(usage)
    if cursor == "charge":
        return "receipt", {"payment": billing.charge(run_id, invoice, state["verdict"], None if keyless else key)}, 0.0
    if cursor == "receipt":
        return "done", {"receipt": billing.send_receipt(run_id, invoice, state["payment"], key)}, 0.0
    raise ValueError(f"unknown cursor {cursor!r}")


def write(conn: psycopg.Connection, data: dict[str, Any]) -> bool:
    """Write the checkpoint ``data`` (guarded by seq); False if a newer one was there."""
    with conn.transaction():
        done = conn.execute(UPSERT, (data["run_id"], data["seq"], data["status"], Jsonb(data))).rowcount
    return done == 1


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m acme_billing.worker RUN_ID [--keyless]", file=sys.stderr)
        return 2
    run_id, keyless = argv[0], "--keyless" in argv[1:]
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute("SELECT data FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            data = {"run_id": run_id, "seq": 0, "version": 1, "cursor": START, "status": "running",
                    "state": billing.initial_state(json.loads(os.environ.get("KILLPOINT_PARAMS") or "{}")),
                    "window": [], "cost_usd": 0.0}
            if not write(conn, data):
                return FENCED_EXIT
        else:
            data = row[0]
        while data["cursor"] != "done":
            cursor, patch, cost = step(run_id, data["cursor"], data["state"], keyless)
            data = {**data, "seq": data["seq"] + 1, "cursor": cursor, "state": {**data["state"], **patch},
                    "status": "done" if cursor == "done" else "running",
                    "cost_usd": round(data["cost_usd"] + cost, 9)}
            if not write(conn, data):
                print(f"acme_billing.worker: checkpoint seq {data['seq']} of {run_id} refused (fenced)",
                      file=sys.stderr)
                return FENCED_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
