"""Mutant: invoice numbers drawn outside the checkpoint transaction. The email step reads the highest
number given so far (its own autocommit connection) and keeps ``next = highest + 1`` in the state; ``record``
inserts it in the checkpoint's transaction. One run at a time, numbers are unique; runs at once draw the same
number, so two invoices share one."""

from __future__ import annotations

import os

import psycopg

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["INVARIANTS", "MIGRATIONS", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS",
           "initial_state"]

SCHEMA_SQL = "CREATE TABLE IF NOT EXISTS invoice_numbers (run_id text PRIMARY KEY, number bigint NOT NULL)"
INVARIANTS = {"one invoice number per charge": {"sql": "SELECT COUNT(DISTINCT number) FROM invoice_numbers",
                                                "equals": "ledger"}}


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        highest = conn.execute("SELECT COALESCE(MAX(number), 0) FROM invoice_numbers").fetchone()[0]
    result = invoice_agent.email(cp, ctx)
    return StepResult(result.cursor, {**result.state, "number": highest + 1})  # BUG: drawn outside the txn


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = invoice_agent.record(cp, ctx)

    def write(cur: psycopg.Cursor) -> None:
        result.in_txn(cur)
        cur.execute("INSERT INTO invoice_numbers (run_id, number) VALUES (%s, %s)", (cp.run_id, cp.state["number"]))

    return StepResult(result.cursor, result.state, in_txn=write)


STEPS = {**invoice_agent.STEPS, "email": email, "record": record}
