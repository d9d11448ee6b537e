"""A correct agent whose effects go to a service that nests its ids (a Zendesk-like ticket API and a
Twilio-like SMS API on one sandbox, `tests.fake_services.ticket_upstream`), reached through the recording
proxy (`--effect tickets=URL`; the step reads the run's URL from `KILLPOINT_EFFECT_TICKETS_URL`).

    plan -> open -> text -> done

`open` opens a ticket (`{"ticket": {"id": 7}}`) and `text` sends an SMS (`{"sid": "SM..."}`), each with its
step's idempotency key, retrying a reset or a 5xx with the same key. The service answers a repeated key
with the first answer and no replay header: only the id, where the service puts it, tells a replay from a
second ticket. `tests.gallery.variants.ticket_agent_keyless` opens its ticket with no key.
"""

from __future__ import annotations

import os
import time
from urllib.parse import quote

import httpx

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

START = "plan"
STATE_VERSION = 1
TRIES = 4


def initial_state(params: dict) -> dict:
    return {"subject": None, "ticket_id": None, "sms_sid": None}


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("open", {"subject": f"Refund {cp.run_id[-4:]}"})


def post(cp: Checkpoint, path: str, body: dict, key: str | None) -> dict:
    """POST to the run's URL of the ticket API, retrying a reset or a 5xx with the same key."""
    url = os.environ["KILLPOINT_EFFECT_TICKETS_URL"].replace("{run_id}", quote(cp.run_id, safe=""))
    headers = {"Idempotency-Key": key} if key is not None else {}
    error: Exception | None = None
    for attempt in range(TRIES):
        try:
            r = httpx.post(url + path, json=body, headers=headers, timeout=30)
        except httpx.TransportError as exc:
            error = exc
        else:
            if r.status_code < 500:
                r.raise_for_status()
                return r.json()
            error = RuntimeError(f"ticket API answered {r.status_code}")
        time.sleep(0.05 * (attempt + 1))
    raise RuntimeError(f"ticket API unreachable after {TRIES} tries: {error}")


def open_ticket(cp: Checkpoint, key: str | None) -> StepResult:
    answer = post(cp, "/v2/tickets", {"ticket": {"subject": cp.state["subject"]}}, key)
    return StepResult("text", {"ticket_id": answer["ticket"]["id"]})


def open_(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return open_ticket(cp, ctx.idempotency_key)


def text(cp: Checkpoint, ctx: StepContext) -> StepResult:
    body = {"To": "+15550100", "Body": f"Ticket {cp.state['ticket_id']} opened"}
    return StepResult("done", {"sms_sid": post(cp, "/2010-04-01/Messages", body, ctx.idempotency_key)["sid"]})


STEPS = {"plan": plan, "open": open_, "text": text}
