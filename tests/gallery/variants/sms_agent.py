"""An agent whose effect goes to a service killpoint has no fake for: a sandbox SMS API, reached through the
recording proxy (`--effect sms=URL`; the step reads the run's URL from `KILLPOINT_EFFECT_SMS_URL`).

    plan -> notify -> done

`notify` texts the customer with the step's idempotency key, retrying a reset or a 5xx with the same key,
as a careful client does; `tests.gallery.variants.sms_agent_keyless` sends no key.
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
    return {"to": str(params.get("to", "+15550100")), "text": None, "sms_id": None}


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("notify", {"text": f"Your refund for {cp.run_id[-4:]} is on its way"})


def sms_url(run_id: str) -> str:
    """The run's URL of the SMS API (a queue worker's URL carries the `{run_id}` slot)."""
    return os.environ["KILLPOINT_EFFECT_SMS_URL"].replace("{run_id}", quote(run_id, safe=""))


def post(url: str, body: dict, key: str | None, what: str = "SMS API") -> dict:
    """POST `body` as JSON with the key, retrying a reset or a 5xx with the same key; the JSON answer."""
    headers = {"Idempotency-Key": key} if key is not None else {}
    error: Exception | None = None
    for attempt in range(TRIES):
        try:
            r = httpx.post(url, json=body, headers=headers, timeout=30)
        except httpx.TransportError as exc:
            error = exc
        else:
            if r.status_code < 500:
                r.raise_for_status()
                return r.json()
            error = RuntimeError(f"{what} answered {r.status_code}")
        time.sleep(0.05 * (attempt + 1))
    raise RuntimeError(f"{what} unreachable after {TRIES} tries: {error}")


def send(cp: Checkpoint, key: str | None) -> dict:
    return post(sms_url(cp.run_id) + "/v1/messages", {"to": cp.state["to"], "text": cp.state["text"]}, key)


def notify(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("done", {"sms_id": send(cp, ctx.idempotency_key)["id"]})


STEPS = {"plan": plan, "notify": notify}
