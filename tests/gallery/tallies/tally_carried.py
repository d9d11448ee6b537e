"""Bug: ``open -> book -> close``. ``book`` credits the customer and reads their tally; ``close`` writes the
tally it read plus the credit back, in the checkpoint's transaction. Alone, a run is right; runs of one
customer at once all read the old tally, and all but one credit are lost from it."""

from __future__ import annotations

import psycopg

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.tallies.common import (
    SCHEMA_SQL,
    STATE_VERSION,
    TALLY_INVARIANTS,
    credit,
    initial_state,
    read,
)

__all__ = ["INVARIANTS", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

INVARIANTS = TALLY_INVARIANTS
START = "open"


def open_(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("book", {})


def book(cp: Checkpoint, ctx: StepContext) -> StepResult:
    seen = read("SELECT credited_cents FROM credit_tallies WHERE customer = %s", cp.state["customer"])
    return StepResult("close", {"entry": credit(cp, ctx), "seen": seen})


def close(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state

    def write(cur: psycopg.Cursor) -> None:
        # BUG: the tally read in `book`, outside this transaction, written back as read + credit
        cur.execute("INSERT INTO credit_tallies (customer, credited_cents) VALUES (%s, %s) ON CONFLICT (customer) "
                    "DO UPDATE SET credited_cents = EXCLUDED.credited_cents", (s["customer"], s["seen"] + s["amount_cents"]))

    return StepResult("done", {}, in_txn=write)


STEPS = {"open": open_, "book": book, "close": close}
