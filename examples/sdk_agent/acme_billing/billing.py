"""Acme's billing code on the real SDKs: OpenAI reviews the invoice, Stripe charges it, Resend mails a receipt.

Nothing here knows killpoint. Each call builds its SDK client from the environment, as it would in
production, where the variables name the real APIs; under killpoint they name the run's fakes:

==================  =========================================================  ===========================
SDK                 base URL                                                   key
==================  =========================================================  ===========================
openai              ``OPENAI_BASE_URL`` (read by the SDK itself)              ``OPENAI_API_KEY``
stripe              ``STRIPE_BASE_URL`` -> ``base_addresses={"api": ...}``    ``STRIPE_API_KEY``
resend              ``RESEND_API_URL`` -> ``resend.api_url``                  ``RESEND_API_KEY``
==================  =========================================================  ===========================

The URLs are read at every call, not once at import: a worker forked from a process that imported the SDKs
before the run's environment was set still reaches its own run. A queue worker's URLs carry the slot
``{run_id}``, filled in here.

``charge(..., key)`` passes the idempotency key to Stripe; with ``key=None`` the stripe SDK makes a random
key per call (reused only on its own retries), so a step repeated after a crash charges twice.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any
from urllib.parse import quote

import openai
import resend
import stripe

MODEL = "gpt-4o-mini"
PRICES_PER_MILLION_USD = (0.15, 0.60)
"""What ``MODEL`` costs per million input and output tokens, by OpenAI's published prices."""
SENDER = "Acme Billing <billing@acme.example>"
RESEND_TRIES = 4
"""The resend SDK does not retry; a 5xx or a reset is retried here, with the same key."""


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    """A new run's state; ``params`` (``KILLPOINT_PARAMS``) may set the invoice's fields."""
    return {"invoice": {"id": str(params.get("invoice", "inv-1042")), "vendor": str(params.get("vendor", "Globex")),
                        "amount_cents": int(params.get("amount_cents", 12_500)),
                        "currency": str(params.get("currency", "usd")),
                        "email": str(params.get("email", "ap@globex.example"))},
            "verdict": None, "payment": None, "receipt": None}


def run_url(var: str, run_id: str) -> str:
    """The URL in ``var``, with a queue worker's ``{run_id}`` slot filled in."""
    return os.environ[var].replace("{run_id}", quote(run_id, safe=""))


def review(run_id: str, invoice: dict[str, Any]) -> tuple[str, dict[str, int]]:
    """Ask the model whether to approve ``invoice``: ``("approve" | "review", usage)``."""
    client = openai.OpenAI(base_url=run_url("OPENAI_BASE_URL", run_id), api_key=os.environ["OPENAI_API_KEY"],
                           max_retries=3)
    answer = client.chat.completions.create(model=MODEL, max_completion_tokens=64, messages=[
        {"role": "system", "content": "You review invoices. End your answer with verdict=approve or verdict=review."},
        {"role": "user", "content": f"Invoice {invoice['id']} from {invoice['vendor']} for "
                                    f"{invoice['amount_cents'] / 100:.2f} {invoice['currency'].upper()}."},
    ])
    text = answer.choices[0].message.content or ""
    found = re.search(r"verdict=(approve|review)", text)
    usage = {"input_tokens": answer.usage.prompt_tokens, "output_tokens": answer.usage.completion_tokens}
    return (found.group(1) if found else "review"), usage


def charge(run_id: str, invoice: dict[str, Any], verdict: str, key: str | None) -> str:
    """Charge the invoice with a confirmed PaymentIntent; the intent's id."""
    client = stripe.StripeClient(os.environ["STRIPE_API_KEY"],
                                 base_addresses={"api": run_url("STRIPE_BASE_URL", run_id)}, max_network_retries=3)
    intent = client.v1.payment_intents.create(
        params={"amount": invoice["amount_cents"], "currency": invoice["currency"], "confirm": True,
                "payment_method": "pm_card_visa", "metadata": {"invoice": invoice["id"], "review": verdict}},
        options={"idempotency_key": key} if key is not None else {},
    )
    return intent.id


def send_receipt(run_id: str, invoice: dict[str, Any], payment: str, key: str) -> str:
    """Mail the receipt; the email's id."""
    resend.api_key = os.environ["RESEND_API_KEY"]
    resend.api_url = run_url("RESEND_API_URL", run_id)
    params: Any = {"from": SENDER, "to": [invoice["email"]], "subject": f"Receipt for invoice {invoice['id']}",
                   "html": f"<p>We charged {invoice['amount_cents'] / 100:.2f} {invoice['currency'].upper()} "
                           f"for invoice {invoice['id']} (payment {payment}).</p>"}
    for attempt in range(RESEND_TRIES):
        try:
            return resend.Emails.send(params, {"idempotency_key": key})["id"]
        except resend.exceptions.ResendError as exc:
            retryable = exc.error_type in ("HttpClientError", "application_error", "rate_limit_exceeded")
            if not retryable or attempt == RESEND_TRIES - 1:
                raise
            time.sleep(0.1 * (attempt + 1))
    raise AssertionError("unreachable")


def cost_usd(usage: dict[str, int]) -> float:
    """Dollars for one answer of ``MODEL`` (its ``usage``), rounded to a nano-dollar."""
    per_input, per_output = PRICES_PER_MILLION_USD
    return round((usage["input_tokens"] * per_input + usage["output_tokens"] * per_output) / 1_000_000, 9)
