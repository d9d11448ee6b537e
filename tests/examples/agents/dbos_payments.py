"""A DBOS workflow that charges and refunds with Stripe's own SDK: charge (a confirmed PaymentIntent) ->
refund (a Refund of it) -> record, its system database on Postgres.

    python dbos_payments.py RUN_ID --keys random|workflow

`random`: the SDK's default, a fresh random Idempotency-Key per call (stripe-python makes one up for each
POST): killed after Stripe applied the charge and before DBOS recorded the step's output, a recovery
creates a second PaymentIntent. `workflow`: the correct lookalike, keys derived from the workflow id and
the step (`RUN_ID:charge`), so a recovery's repeat is answered with the first intent.
"""

from __future__ import annotations

import os
import sys

import stripe
from dbos import DBOS, DBOSConfig, SetWorkflowID

RUN_ID = sys.argv[1] if len(sys.argv) > 1 else ""
KEYS = sys.argv[sys.argv.index("--keys") + 1] if "--keys" in sys.argv[:-1] else ""


def client() -> stripe.StripeClient:
    base = os.environ["STRIPE_BASE_URL"].replace("{run_id}", RUN_ID)
    return stripe.StripeClient(os.environ.get("STRIPE_API_KEY", "sk_test"), base_addresses={"api": base},
                               max_network_retries=3)


def options(step: str) -> dict:
    return {"idempotency_key": f"{DBOS.workflow_id}:{step}"} if KEYS == "workflow" else {}


@DBOS.step()
def charge() -> str:
    intent = client().v1.payment_intents.create(
        params={"amount": 4200, "currency": "eur", "confirm": True, "payment_method": "pm_card_visa"},
        options=options("charge"))
    return intent.id


@DBOS.step()
def refund(intent_id: str) -> str:
    return client().v1.refunds.create(params={"payment_intent": intent_id}, options=options("refund")).id


@DBOS.step()
def record(intent_id: str, refund_id: str) -> dict:
    return {"intent": intent_id, "refund": refund_id}


@DBOS.workflow()
def payments_workflow() -> dict:
    intent = charge()
    return record(intent, refund(intent))


def main() -> int:
    if not RUN_ID or RUN_ID.startswith("-") or KEYS not in ("random", "workflow"):
        print("usage: dbos_payments.py RUN_ID --keys random|workflow", file=sys.stderr)
        return 2
    config: DBOSConfig = {"name": "payments", "system_database_url": os.environ["DATABASE_URL"],
                          "executor_id": RUN_ID, "application_version": "1"}
    DBOS(config=config)
    DBOS.launch()
    try:
        with SetWorkflowID(RUN_ID):
            payments_workflow()
    finally:
        DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
