"""Mutant: a per-process memo shared across runs. The charge step keeps each receipt in a module-level dict
keyed by (account, amount), "so a retried charge is never sent twice". A queue worker serves many runs in
one process: the next invoice of the same customer and amount finds the last run's receipt and is never
charged, while its balance is still credited."""

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


_RECEIPTS: dict[tuple[str, int], dict] = {}  # BUG: outlives the run: one process serves many runs


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    memo = (s["customer"]["account"], s["amount_cents"])
    if memo not in _RECEIPTS:
        _RECEIPTS[memo] = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                            key=ctx.idempotency_key)
    return StepResult("email", {"charge_id": _RECEIPTS[memo].get("id")})


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    result = invoice_agent.record(cp, ctx)

    def write(cur: psycopg.Cursor) -> None:
        result.in_txn(cur)
        credit(cur, s["customer"]["account"], s["amount_cents"])

    return StepResult(result.cursor, result.state, in_txn=write)


STEPS = {**invoice_agent.STEPS, "charge": charge, "record": record}
