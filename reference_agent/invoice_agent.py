"""The reference invoice agent: a step module written to the contract, doing everything right.

Flow (one externally visible effect per step)::

    plan -> validate -> charge -> email -> record -> done

- ``plan`` and ``validate`` ask the model (no external effect). Their answers are kept in the state; the
  validation's verdict picks the email template and the email carries a reference derived from both
  answers, so a resumed run that sent the model a different window ends in a different state.
- ``charge`` charges the ledger with the step's idempotency key. It refuses to charge an invoice that has
  no ``"validate"`` approval and sends the run back to ``validate`` instead: that is the re-done approved
  step a missing migration causes (v1 had ``validated: bool``).
- ``email`` sends the invoice through the mailer with the step's idempotency key.
- ``record`` writes the invoice row in our own database, inside the checkpoint's transaction: exactly once
  by construction.

State history: v1 had ``validated: bool`` and flat ``customer_email`` / ``account``; v2 replaced
``validated`` with ``approvals: list[str]``; v3 nested the customer as ``customer: {email, account}``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg

from .runtime import Checkpoint, StepContext, StepResult

START = "plan"
STATE_VERSION = 3
PREVIOUS_STEPS = "killpoint.reference_agent.invoice_agent_v2"
"""This agent's code at STATE_VERSION 2: what schema-upgrade pauses a run under before resuming it here."""


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    """A new run's state. ``params`` may set invoice_id, amount_cents, currency, customer_email, account."""
    return {
        "invoice_id": str(params.get("invoice_id", "INV-1001")),
        "customer": {"email": str(params.get("customer_email", "billing@example.com")),
                     "account": str(params.get("account", "acct-42"))},
        "amount_cents": int(params.get("amount_cents", 12_500)),
        "currency": str(params.get("currency", "usd")),
        "plan": None,
        "validation": None,
        "verdict": None,
        "approvals": [],
        "charge_id": None,
        "email_id": None,
        "recorded": False,
    }


def _v1_to_v2(state: dict[str, Any]) -> dict[str, Any]:
    validated = bool(state.pop("validated", False))
    state["approvals"] = ["validate"] if validated else []
    return state


def _v2_to_v3(state: dict[str, Any]) -> dict[str, Any]:
    state["customer"] = {"email": state.pop("customer_email"), "account": state.pop("account")}
    return state


MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}


def _describe(state: dict[str, Any]) -> str:
    return (f"invoice {state['invoice_id']} for {state['amount_cents']} {state['currency']} cents, "
            f"account {state['customer']['account']}, customer {state['customer']['email']}")


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    window = [{"role": "user", "content": f"Plan the billing of {_describe(cp.state)}: charge it, email "
                                          "the invoice, record it. Answer with a short plan."}]
    reply = ctx.model.ask(window)
    return StepResult("validate", {"plan": reply.text}, [*window, reply.message], reply.cost_usd)


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    window = [*cp.window, {"role": "user", "content": f"Validate {_describe(cp.state)} against the plan. "
                                                      "Answer APPROVE or REJECT, with a reason."}]
    reply = ctx.model.ask(window)
    approvals = [a for a in cp.state["approvals"] if a != "validate"] + ["validate"]
    return StepResult("charge", {"validation": reply.text, "verdict": verdict(reply.text),
                                 "approvals": approvals}, [*window, reply.message], reply.cost_usd)


def verdict(answer: str) -> str:
    """``"review"`` when the model's answer asks for a human review, else ``"approve"``."""
    return "review" if "review" in answer.lower() else "approve"


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    if "validate" not in s["approvals"]:
        return StepResult("validate")
    receipt = ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                key=ctx.idempotency_key)
    return StepResult("email", {"charge_id": receipt.get("id")})


def reference(state: dict[str, Any]) -> str:
    """A short digest of the model's answers; the email carries it, so the answers steer the outcome."""
    text = f"{state['plan']}\n{state['validation']}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    data = {"invoice_id": s["invoice_id"], "amount_cents": s["amount_cents"], "currency": s["currency"],
            "charge_id": s["charge_id"], "reference": reference(s)}
    template = "invoice" if s["verdict"] == "approve" else "invoice-under-review"
    receipt = ctx.mailer.send(s["customer"]["email"], template, data, key=ctx.idempotency_key)
    return StepResult("record", {"email_id": receipt.get("id")})


def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state

    def insert(cur: psycopg.Cursor) -> None:
        # No ON CONFLICT: a second row would be a bug, and it should fail loudly.
        cur.execute("INSERT INTO invoices (run_id, invoice_id, amount_cents) VALUES (%s, %s, %s)",
                    (cp.run_id, s["invoice_id"], s["amount_cents"]))

    return StepResult("done", {"recorded": True}, in_txn=insert)


STEPS = {"plan": plan, "validate": validate, "charge": charge, "email": email, "record": record}

OWN_EFFECTS_SQL = "SELECT invoice_id, amount_cents FROM invoices WHERE run_id = %s ORDER BY invoice_id"
"""The own-database effect (the invoice row), for a harness comparing effects with a crash-free run."""
