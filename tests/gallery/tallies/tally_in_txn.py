"""Correct, and looks like ``tally_carried``: the same steps, and ``book`` reads the tally too (to show it),
but ``close`` adds the credit to the tally as it stands in the checkpoint's transaction
(``credited_cents = credit_tallies.credited_cents + credit``): runs of one customer at once each add theirs."""

from __future__ import annotations

import psycopg

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.tallies.common import SCHEMA_SQL, STATE_VERSION, TALLY_INVARIANTS, initial_state
from tests.gallery.tallies.tally_carried import book, open_

__all__ = ["INVARIANTS", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

INVARIANTS = TALLY_INVARIANTS
START = "open"


def close(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state

    def write(cur: psycopg.Cursor) -> None:
        cur.execute("INSERT INTO credit_tallies (customer, credited_cents) VALUES (%s, %s) ON CONFLICT (customer) "
                    "DO UPDATE SET credited_cents = credit_tallies.credited_cents + EXCLUDED.credited_cents",
                    (s["customer"], s["amount_cents"]))

    return StepResult("done", {}, in_txn=write)


STEPS = {"open": open_, "book": book, "close": close}
