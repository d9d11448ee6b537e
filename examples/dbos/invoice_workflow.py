"""An invoice workflow on DBOS, as a DBOS user writes it: three steps (plan, email, record) in one durable
workflow, its system database on Postgres, the email sent with Resend's own SDK. Nothing in it knows
killpoint.

    python invoice_workflow.py RUN_ID [--keyed]

starts the workflow `RUN_ID` (its workflow id) or, if DBOS has it already, lets DBOS recover it from its
last recorded step; a finished workflow returns its recorded result. The executor id is the run id: DBOS
recovers, at launch, the pending workflows of its own executor id, so with one shared id one run's process
would pick up (and run) another run's workflow. Without `--keyed`, the email is sent bare: killed after
Resend applied it and before DBOS recorded the step's output, a recovery sends it again. With `--keyed`, it
carries the idempotency key `RUN_ID:email`, and Resend answers a repeat with the first email.

Environment: DATABASE_URL (the system database), RESEND_API_KEY and RESEND_API_URL (read by the resend SDK at
import). Under killpoint:

    killpoint run --adapter dbos --worker-cmd 'python examples/dbos/invoice_workflow.py {run_id} --keyed'
"""

from __future__ import annotations

import os
import sys

import resend
from dbos import DBOS, DBOSConfig, SetWorkflowID

KEYED = "--keyed" in sys.argv[2:]
RUN_ID = sys.argv[1] if len(sys.argv) > 1 else ""


@DBOS.step()
def plan() -> dict:
    return {"customer": "ada@example.com", "amount_cents": 4200}


@DBOS.step(retries_allowed=True, max_attempts=5, interval_seconds=0.2)  # a 503 or a reset is retried
def email(invoice: dict) -> str:
    params: resend.Emails.SendParams = {
        "from": "billing@example.com", "to": [invoice["customer"]],
        "subject": "Your invoice", "html": f"<p>Amount due: {invoice['amount_cents'] / 100:.2f} EUR</p>",
    }
    options: resend.Emails.SendOptions = {"idempotency_key": f"{DBOS.workflow_id}:email"} if KEYED else {}
    return resend.Emails.send(params, options)["id"]


@DBOS.step()
def record(invoice: dict, email_id: str) -> dict:
    return {**invoice, "email_id": email_id, "recorded": True}


@DBOS.workflow()
def invoice_workflow() -> dict:
    invoice = plan()
    sent = email(invoice)
    return record(invoice, sent)


def main() -> int:
    if not RUN_ID or RUN_ID.startswith("-"):
        print("usage: invoice_workflow.py RUN_ID [--keyed]", file=sys.stderr)
        return 2
    resend.api_key = os.environ.get("RESEND_API_KEY", "re_test")
    config: DBOSConfig = {"name": "invoice", "system_database_url": os.environ["DATABASE_URL"],
                          "executor_id": RUN_ID, "application_version": "1"}
    DBOS(config=config)
    DBOS.launch()
    try:
        with SetWorkflowID(RUN_ID):
            invoice_workflow()
    finally:
        DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
