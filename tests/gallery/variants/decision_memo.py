"""A correct agent that looks like ``mutants.approve_and_charge``: the approval and the charge are one step,
but the model's answer is kept (committed, in the agent's own ``decisions`` table) before the charge, and a
resumed step reads it back instead of asking again. The decision the charge was made on is the one the run
records, whatever a sampling model would answer the second time. killpoint must pass it."""

from __future__ import annotations

import os
from collections.abc import Callable

import psycopg

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    START,
    STATE_VERSION,
    _describe,
    initial_state,
    verdict,
)
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

SCHEMA_SQL = ("CREATE TABLE IF NOT EXISTS decisions "
              "(run_id text PRIMARY KEY, answer text NOT NULL, cost_usd double precision NOT NULL)")
OWN_EFFECTS_SQL = invoice_agent.OWN_EFFECTS_SQL


def _decided(run_id: str, ask: Callable[[], tuple[str, float]]) -> tuple[str, float]:
    """The run's kept answer and its cost, or the model's, kept (committed) before anything acts on it."""
    query = "SELECT answer, cost_usd FROM decisions WHERE run_id = %s"
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute(query, (run_id,)).fetchone()
        if row is None:
            text, cost = ask()
            conn.execute("INSERT INTO decisions (run_id, answer, cost_usd) VALUES (%s, %s, %s) "
                         "ON CONFLICT DO NOTHING", (run_id, text, cost))
            row = conn.execute(query, (run_id,)).fetchone()
        return row[0], row[1]


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    window = [*cp.window, {"role": "user", "content": f"Validate {_describe(s)} against the plan. "
                                                      "Answer APPROVE or REJECT, with a reason."}]

    def ask() -> tuple[str, float]:
        reply = ctx.model.ask(window)
        return reply.text, reply.cost_usd

    text, cost = _decided(cp.run_id, ask)
    decided = verdict(text)
    charge_id = None
    if decided == "approve":
        receipt = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                    key=ctx.idempotency_key)
        charge_id = receipt.get("id")
    message = {"role": "assistant", "content": text}
    return StepResult("email", {"validation": text, "verdict": decided, "approvals": ["validate"],
                                "charge_id": charge_id}, [*window, message], cost)


STEPS = {"plan": invoice_agent.plan, "validate": validate, "email": invoice_agent.email,
         "record": invoice_agent.record}
