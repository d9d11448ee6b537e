"""What the tally agents share (not an agent): their state, a ledger credit keyed by the step, a figure read
on a connection of the step's own (outside any checkpoint transaction), and the tables with the invariants
over them."""

from __future__ import annotations

import os
from typing import Any

import psycopg

from killpoint.reference_agent import Checkpoint, StepContext

STATE_VERSION = 1

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS credit_tallies (customer text PRIMARY KEY, credited_cents bigint NOT NULL);
CREATE TABLE IF NOT EXISTS seat_counts (show text PRIMARY KEY, sold integer NOT NULL)
"""
TALLY_INVARIANTS = {"tallies follow the credits": {"sql": "SELECT COALESCE(SUM(credited_cents), 0) FROM credit_tallies",
                                                  "equals": "ledger.amount_cents"}}
SEAT_INVARIANTS = {"one seat sold per payment": {"sql": "SELECT COALESCE(SUM(sold), 0) FROM seat_counts",
                                                 "equals": "ledger"}}


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    """The same customer (and show) for every run: `concurrent-runs` gives its runs the same parameters."""
    return {"customer": str(params.get("customer", "cust-7")), "show": str(params.get("show", "matinee")),
            "amount_cents": int(params.get("amount_cents", 700)), "entry": None, "seen": None}


def credit(cp: Checkpoint, ctx: StepContext) -> str | None:
    """Book the run's credit in the ledger, keyed by the step (a replay answers the first entry again)."""
    s = cp.state
    return ctx.ledger.charge(s["customer"], s["amount_cents"], "usd", key=ctx.idempotency_key).get("id")


def read(sql: str, key: str) -> int:
    """One figure, read on a connection of its own (autocommit): what the step saw, not what it will write."""
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute(sql, (key,)).fetchone()
    return int(row[0]) if row else 0
