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
from urllib.parse import quote

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.variants.sms_agent import post

START = "plan"
STATE_VERSION = 1


def initial_state(params: dict) -> dict:
    return {"subject": None, "ticket_id": None, "sms_sid": None}


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("open", {"subject": f"Refund {cp.run_id[-4:]}"})


def call(cp: Checkpoint, path: str, body: dict, key: str | None) -> dict:
    """POST to the run's URL of the ticket API (`sms_agent.post`: retried with the same key)."""
    url = os.environ["KILLPOINT_EFFECT_TICKETS_URL"].replace("{run_id}", quote(cp.run_id, safe=""))
    return post(url + path, body, key, "ticket API")


def open_ticket(cp: Checkpoint, key: str | None) -> StepResult:
    answer = call(cp, "/v2/tickets", {"ticket": {"subject": cp.state["subject"]}}, key)
    return StepResult("text", {"ticket_id": answer["ticket"]["id"]})


def open_(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return open_ticket(cp, ctx.idempotency_key)


def text(cp: Checkpoint, ctx: StepContext) -> StepResult:
    body = {"To": "+15550100", "Body": f"Ticket {cp.state['ticket_id']} opened"}
    return StepResult("done", {"sms_sid": call(cp, "/2010-04-01/Messages", body, ctx.idempotency_key)["sid"]})


STEPS = {"plan": plan, "open": open_, "text": text}
