"""A correct stock-count agent whose resumed ``report`` step reads through a reporting role the database keeps
full: its own steps (``tally`` -> ``report``), its own table (``stock_tallies``), no model call, no service.

``report`` marks its attempt in ``done_keys``; finding an earlier attempt's mark (it is resumed), it reconciles
through a second connection as the role ``kp_reporting``, whose ``CONNECTION LIMIT`` is 0: Postgres refuses it
("too many connections for role", SQLSTATE 53300), as it refuses any worker once its slots are taken. Crash-free
it finishes; killed after ``report`` began, every successor dies of the refusal. That is the database's doing,
not a bug: killpoint must say UNKNOWN, naming the refusal, never FAIL."""

from __future__ import annotations

import os
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

START = "tally"
STATE_VERSION = 1
ROLE = "kp_reporting"

SCHEMA_SQL = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        CREATE ROLE {ROLE} LOGIN CONNECTION LIMIT 0;
    END IF;
END $$;
CREATE TABLE IF NOT EXISTS stock_tallies (run_id text PRIMARY KEY, sku text NOT NULL, units int NOT NULL)
"""

OWN_EFFECTS_SQL = "SELECT sku, units FROM stock_tallies WHERE run_id = %s"


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"sku": str(params.get("sku", "SKU-1")), "units": None, "reported": False}


def tally(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("report", {"units": 12})


def report(cp: Checkpoint, ctx: StepContext) -> StepResult:
    mark = f"{ctx.idempotency_key}:attempt"
    if ctx.done_keys.was_done(mark):  # resumed: reconcile as the reporting role (refused: its slots are full)
        with psycopg.connect(make_conninfo(os.environ["DATABASE_URL"], user=ROLE)) as side:
            side.execute("SELECT 1")
    ctx.done_keys.mark_done(mark)

    def insert(cur: psycopg.Cursor) -> None:
        cur.execute("INSERT INTO stock_tallies (run_id, sku, units) VALUES (%s, %s, %s)",
                    (cp.run_id, cp.state["sku"], cp.state["units"]))

    return StepResult("done", {"reported": True}, in_txn=insert)


STEPS = {"tally": tally, "report": report}
