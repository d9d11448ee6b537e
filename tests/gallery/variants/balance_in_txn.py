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
from killpoint.reference_agent.runtime import Checkpoint
from tests.gallery.balances import INVARIANTS, SCHEMA_SQL, credit
from tests.gallery.record_also import record_also

__all__ = ["INVARIANTS", "MIGRATIONS", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS",
           "initial_state"]


def add_to_balance(cur: psycopg.Cursor, cp: Checkpoint) -> None:
    credit(cur, cp.state["customer"]["account"], cp.state["amount_cents"])


STEPS = {**invoice_agent.STEPS, "record": record_also(add_to_balance)}
