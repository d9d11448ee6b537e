"""The invoice agent writing its invoice row on the worker's autocommit connection (db-crash): the row
commits at once, before the checkpoint's transaction. When the database dies inside that transaction the
row stays and the checkpoint does not, so the resumed `record` inserts the row again and fails on it."""

from __future__ import annotations

from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    ctx.done_keys.conn.execute(  # BUG: not in the checkpoint's transaction
        "INSERT INTO invoices (run_id, invoice_id, amount_cents) VALUES (%s, %s, %s)",
        (cp.run_id, s["invoice_id"], s["amount_cents"]))
    return StepResult("done", {"recorded": True})


STEPS = {**_STEPS, "record": record}
