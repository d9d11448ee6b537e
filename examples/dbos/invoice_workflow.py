"""An invoice workflow on DBOS, as a DBOS user writes it: three steps (plan, email, record) in one durable
workflow, its system database on Postgres, the email sent with Resend's own SDK. Nothing in it knows
killpoint.

    python invoice_workflow.py RUN_ID [--keyed] [--dbos-retries]

starts the workflow `RUN_ID` (its workflow id) or, if DBOS has it already, lets DBOS recover it from its
last recorded step; a finished workflow returns its recorded result. The executor id is the run id: DBOS
recovers, at launch, the pending workflows of its own executor id, so with one shared id one run's process
would pick up (and run) another run's workflow. Without `--keyed`, the email is sent bare: killed after
Resend applied it and before DBOS recorded the step's output, a recovery sends it again. With `--keyed`, it
carries the idempotency key `RUN_ID:email`, and Resend answers a repeat with the first email.

A Resend outage is transient: the email step retries it a few times, then takes the process down (exit 1)
without recording anything, so the workflow stays PENDING and DBOS resumes it from its last recorded step when
the worker next starts (as a supervisor restarts it). It must not let the error reach DBOS: DBOS records a
step's exception as the step's output and a workflow that raises as ERROR, for good (never recovered), so an
outage longer than the step's retries would end the invoice unsent. Only a refusal (a 4xx other than 429)
fails the workflow. `--dbos-retries` is that mistake, kept to show it is found: the step retried by DBOS
(`retries_allowed`, 5 attempts), whose exhausted retries end the workflow ERROR.

Environment: DATABASE_URL (the system database), RESEND_API_KEY and RESEND_API_URL (read by the resend SDK at
import). Under killpoint:

    killpoint run --adapter dbos --worker-cmd 'python examples/dbos/invoice_workflow.py {run_id} --keyed'
"""

from __future__ import annotations

import os
import sys
import time

import resend
from dbos import DBOS, DBOSConfig, SetWorkflowID

KEYED = "--keyed" in sys.argv[2:]
DBOS_RETRIES = "--dbos-retries" in sys.argv[2:]
RUN_ID = sys.argv[1] if len(sys.argv) > 1 else ""


@DBOS.step()
def plan() -> dict:
    return {"customer": "ada@example.com", "amount_cents": 4200}


ATTEMPTS, FIRST_WAIT = 5, 0.2  # 0.2 + 0.4 + 0.8 + 1.6 s between the attempts


def transient(exc: Exception) -> bool:
    """A 5xx, a rate limit (429) or a broken connection: Resend may answer later. A 4xx will not."""
    if isinstance(exc, resend.exceptions.ResendError):
        code = str(exc.code)
        return not (code.isdigit() and 400 <= int(code) < 500 and code != "429")
    return isinstance(exc, (RuntimeError, OSError))  # the SDK's "Request failed" on a reset


def send(invoice: dict) -> str:
    """One attempt to email the invoice through Resend."""
    params: resend.Emails.SendParams = {
        "from": "billing@example.com", "to": [invoice["customer"]],
        "subject": "Your invoice", "html": f"<p>Amount due: {invoice['amount_cents'] / 100:.2f} EUR</p>",
    }
    options: resend.Emails.SendOptions = {"idempotency_key": f"{DBOS.workflow_id}:email"} if KEYED else {}
    return resend.Emails.send(params, options)["id"]


if DBOS_RETRIES:
    @DBOS.step(retries_allowed=True, max_attempts=ATTEMPTS, interval_seconds=FIRST_WAIT)
    def email(invoice: dict) -> str:
        return send(invoice)  # an outage that outlasts the retries ends the workflow ERROR, for good
else:
    @DBOS.step()
    def email(invoice: dict) -> str:
        for attempt in range(ATTEMPTS):
            try:
                return send(invoice)
            except Exception as exc:
                if not transient(exc):
                    raise  # refused for good: the workflow fails
                if attempt + 1 == ATTEMPTS:
                    print(f"Resend still failing after {ATTEMPTS} attempts ({exc}): exiting, the workflow stays "
                          "pending and resumes at the next start", file=sys.stderr, flush=True)
                    os._exit(1)  # before DBOS records the error: nothing of this attempt is kept
                time.sleep(FIRST_WAIT * 2 ** attempt)
        raise AssertionError("unreachable")


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
        print("usage: invoice_workflow.py RUN_ID [--keyed] [--dbos-retries]", file=sys.stderr)
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
