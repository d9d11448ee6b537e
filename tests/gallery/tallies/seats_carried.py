"""Bug: ``reserve -> pay -> issue``. ``reserve`` reads how many seats of the show are sold, ``pay`` credits
the ledger, ``issue`` writes the count it read plus one in the checkpoint's transaction (the count two steps
old). Runs of one show at once all count from the same figure: three payments, one seat sold."""

from __future__ import annotations

import psycopg

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.tallies.common import (
    SCHEMA_SQL,
    SEAT_INVARIANTS,
    STATE_VERSION,
    credit,
    initial_state,
    read,
)

__all__ = ["INVARIANTS", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

INVARIANTS = SEAT_INVARIANTS
START = "reserve"


def reserve(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("pay", {"seen": read("SELECT sold FROM seat_counts WHERE show = %s", cp.state["show"])})


def pay(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("issue", {"entry": credit(cp, ctx)})


def issue(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state

    def write(cur: psycopg.Cursor) -> None:
        # BUG: the count read in `reserve` written back as count + 1
        cur.execute("INSERT INTO seat_counts (show, sold) VALUES (%s, %s) ON CONFLICT (show) "
                    "DO UPDATE SET sold = EXCLUDED.sold", (s["show"], s["seen"] + 1))

    return StepResult("done", {}, in_txn=write)


STEPS = {"reserve": reserve, "pay": pay, "issue": issue}
