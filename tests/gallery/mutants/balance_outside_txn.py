"""Mutant: the customer's balance is read outside the checkpoint transaction and written back later. The
charge step reads ``balances`` (its own autocommit connection) and keeps the figure in the state; ``record``
writes ``read + amount`` back in the checkpoint's transaction. Alone, a run is right; two runs of one
customer at once both read the old balance, and one charge is lost from it (a lost update)."""

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
from tests.gallery.balances import INVARIANTS, SCHEMA_SQL

__all__ = ["INVARIANTS", "MIGRATIONS", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS",
           "initial_state"]



def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute("SELECT balance_cents FROM balances WHERE account = %s",
                           (cp.state["customer"]["account"],)).fetchone()
    result = invoice_agent.charge(cp, ctx)
    return StepResult(result.cursor, {**result.state, "balance_before": row[0] if row else 0})


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    result = invoice_agent.record(cp, ctx)

    def write(cur: psycopg.Cursor) -> None:
        result.in_txn(cur)
        # BUG: a balance read in an earlier step, outside this transaction, written back as read + amount
        cur.execute("INSERT INTO balances (account, balance_cents) VALUES (%s, %s) ON CONFLICT (account) "
                    "DO UPDATE SET balance_cents = EXCLUDED.balance_cents",
                    (s["customer"]["account"], s.get("balance_before", 0) + s["amount_cents"]))

    return StepResult(result.cursor, result.state, in_txn=write)


STEPS = {**invoice_agent.STEPS, "charge": charge, "record": record}
