"""A correct agent that looks like ``mutants.balance_outside_txn``: it keeps a balance per customer too, but
adds the amount in the checkpoint's transaction (``balance_cents = balances.balance_cents + amount``), so
concurrent runs of one customer each add theirs. killpoint must pass it in concurrent-runs and the fleet."""

from __future__ import annotations

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
from tests.gallery.balances import INVARIANTS, SCHEMA_SQL, credit

__all__ = ["INVARIANTS", "MIGRATIONS", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS",
           "initial_state"]



def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    result = invoice_agent.record(cp, ctx)

    def write(cur: psycopg.Cursor) -> None:
        result.in_txn(cur)
        credit(cur, s["customer"]["account"], s["amount_cents"])

    return StepResult(result.cursor, result.state, in_txn=write)


STEPS = {**invoice_agent.STEPS, "record": record}
