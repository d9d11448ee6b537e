"""Corpus: several effects in one request. The email step sends the invoice to the customer and a copy to
the accounts team as one Resend batch (`POST /emails/batch`, one Idempotency-Key for the batch, two emails
applied). Correct: one request, two effects, each done once; a replayed batch is deduplicated whole."""

from __future__ import annotations

import os

import httpx

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.context import for_run
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
    reference,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

ACCOUNTS = "accounts@example.com"


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    text = f"Invoice {s['invoice_id']}: {s['amount_cents']} {s['currency']} cents, charge {s['charge_id']}, " \
           f"reference {reference(s)}."
    batch = [{"from": "billing@example.com", "to": [to], "subject": f"Invoice {s['invoice_id']}", "text": text}
             for to in (s["customer"]["email"], ACCOUNTS)]
    response = httpx.post(for_run(os.environ["RESEND_API_URL"], cp.run_id) + "/emails/batch", json=batch,
                          headers={"Authorization": f"Bearer {os.environ['RESEND_API_KEY']}",
                                   "Idempotency-Key": ctx.idempotency_key}, timeout=30)
    ctx.point("effect.responded")
    response.raise_for_status()
    return StepResult("record", {"email_id": response.json()["data"][0]["id"]})


STEPS = {**_STEPS, "email": email}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
