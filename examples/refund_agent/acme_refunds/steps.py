"""Acme's refund agent: a killpoint step module that does everything right.

Flow (one externally visible effect per step)::

    decide -> refund -> notify -> record -> done
       \\______________/^            (an escalated request skips the refund)

- ``decide`` applies Acme's refund policy (no model call, no effect): a refund of a refundable reason up to
  the auto-approve limit is ``approved``, anything else is ``escalated`` to a human. It stamps the decision
  with the wall-clock time (``decided_at``), which differs in every run: ``NONDETERMINISTIC`` says so.
- ``refund`` books the refund in the ledger, keyed with the step's idempotency key. (The fake ledger knows
  only charges of a positive amount, so a refund is booked as a charge of the refunded amount to the
  customer's credit account, ``credit:<account>``.)
- ``notify`` emails the customer through the mailer, keyed with the step's idempotency key.
- ``record`` writes the refund's row in Acme's own table, ``acme_refunds``, inside the checkpoint's own
  transaction (``in_txn``): the row and the checkpoint commit together or not at all.

The table is the module's own: ``SCHEMA_SQL`` creates it (killpoint runs it once per database, before any
run) and ``OWN_EFFECTS_SQL`` lists a run's rows, so killpoint can compare them with a crash-free run's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

START = "decide"
STATE_VERSION = 1

AUTO_APPROVE_LIMIT_CENTS = 20_000
REFUNDABLE_REASONS = frozenset({"damaged", "late", "not-received", "wrong-item"})

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS acme_refunds (
    run_id       text   NOT NULL,
    refund_id    text   NOT NULL,
    order_id     text   NOT NULL,
    decision     text   NOT NULL,
    amount_cents bigint NOT NULL,
    ledger_entry text,
    email_id     text,
    PRIMARY KEY (run_id, refund_id)
)
"""
"""Acme's own table: idempotent DDL, run once per database before any run."""

OWN_EFFECTS_SQL = """
SELECT refund_id, order_id, decision, amount_cents, ledger_entry, email_id
FROM acme_refunds WHERE run_id = %s ORDER BY refund_id
"""
"""A run's rows in Acme's own table (``%s`` is the run id): compared with the crash-free run's."""

NONDETERMINISTIC = ("state.decided_at",)
"""Fields that differ between two runs by design: left out of every comparison."""


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    """A new run's state. ``params`` (``KILLPOINT_PARAMS``) may set refund_id, order_id, customer_email,
    account, amount_cents, currency and reason."""
    return {
        "refund_id": str(params.get("refund_id", "RF-2001")),
        "order_id": str(params.get("order_id", "ORD-7731")),
        "customer": {"email": str(params.get("customer_email", "pat@example.com")),
                     "account": str(params.get("account", "cust-88"))},
        "amount_cents": int(params.get("amount_cents", 4_999)),
        "currency": str(params.get("currency", "usd")),
        "reason": str(params.get("reason", "damaged")),
        "decision": None,
        "decided_at": None,
        "ledger_entry": None,
        "email_id": None,
        "recorded": False,
    }


def decide(cp: Checkpoint, ctx: StepContext) -> StepResult:
    """Acme's policy: refundable reason and at most the limit -> approved; anything else -> escalated."""
    s = cp.state
    approved = s["reason"] in REFUNDABLE_REASONS and 0 < s["amount_cents"] <= AUTO_APPROVE_LIMIT_CENTS
    decision = "approved" if approved else "escalated"
    return StepResult("refund" if approved else "notify",
                      {"decision": decision, "decided_at": datetime.now(UTC).isoformat()})


def credit_account(state: dict[str, Any]) -> str:
    """The ledger account a refund is booked to."""
    return f"credit:{state['customer']['account']}"


def refund(cp: Checkpoint, ctx: StepContext) -> StepResult:
    """Book the refund in the ledger. The key is the step's: a replay of this step repeats it, and the
    ledger answers the first entry again instead of booking a second one."""
    s = cp.state
    entry = ctx.ledger.charge(credit_account(s), s["amount_cents"], s["currency"], key=ctx.idempotency_key)
    return StepResult("notify", {"ledger_entry": entry.get("id")})


def email_data(state: dict[str, Any]) -> dict[str, Any]:
    return {"refund_id": state["refund_id"], "order_id": state["order_id"], "amount_cents": state["amount_cents"],
            "currency": state["currency"], "ledger_entry": state["ledger_entry"]}


def notify(cp: Checkpoint, ctx: StepContext) -> StepResult:
    """Tell the customer: the refund is on its way, or a human will look at it."""
    s = cp.state
    template = "refund-issued" if s["decision"] == "approved" else "refund-escalated"
    receipt = ctx.mailer.send(s["customer"]["email"], template, email_data(s), key=ctx.idempotency_key)
    return StepResult("record", {"email_id": receipt.get("id")})


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    """Acme's own row, committed in the checkpoint's transaction: exactly once by construction."""
    s = cp.state

    def insert(cur: psycopg.Cursor) -> None:
        # No ON CONFLICT: a second row for one refund would be a bug, and should fail loudly.
        cur.execute("INSERT INTO acme_refunds (run_id, refund_id, order_id, decision, amount_cents, ledger_entry,"
                    " email_id) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (cp.run_id, s["refund_id"], s["order_id"], s["decision"], s["amount_cents"],
                     s["ledger_entry"], s["email_id"]))

    return StepResult("done", {"recorded": True}, in_txn=insert)


STEPS = {"decide": decide, "refund": refund, "notify": notify, "record": record}
