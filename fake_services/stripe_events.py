"""The fake Stripe's events: what each applied effect announces, listed by ``GET /v1/events`` and sent as
signed webhooks.

Events are derived, not kept: the events of an effect follow from its object before and after it
(``stripe_store.Store`` of the run's effects up to it), so they are the same on every read, and a
deduplicated retry announces nothing.

=================================  =================================================================
effect                             events (in this order)
=================================  =================================================================
intent created                     ``payment_intent.created``, then as "intent confirmed" if it was
intent confirmed (or created so)   ``charge.succeeded``, then ``payment_intent.succeeded`` (or
                                   ``payment_intent.amount_capturable_updated`` for a manual capture)
intent captured                    ``charge.captured``, ``payment_intent.succeeded``
intent canceled                    ``payment_intent.canceled``
charge created                     ``charge.succeeded``
refund created                     ``refund.created``, ``charge.refunded`` (the charge with the refund)
refund canceled                    ``refund.updated``
customer created / updated         ``customer.created`` / ``customer.updated``
=================================  =================================================================

Each is ``{"id": "evt_…", "object": "event", "api_version", "created", "data": {"object": …},
"livemode": false, "pending_webhooks", "request": {"id": "req_…", "idempotency_key": …}, "type"}``.

Webhooks: with ``KILLPOINT_STRIPE_WEBHOOK_URL`` set in the fakes' process (``{run_id}`` in it is replaced
by the run's id), each effect's events are POSTed there after the request is answered, signed with
``KILLPOINT_STRIPE_WEBHOOK_SECRET`` (default :data:`DEFAULT_SECRET`) in the ``Stripe-Signature`` header
(``webhooks.py``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import webhooks
from .canon import digest
from .stripe_objects import CREATED
from .stripe_store import SERVICE, Store

API_VERSION = "2026-10-28.endive"
"""The ``api_version`` of every event: that of the stripe SDK the fake was checked with (16.1.0)."""
URL_VAR = "KILLPOINT_STRIPE_WEBHOOK_URL"
SECRET_VAR = "KILLPOINT_STRIPE_WEBHOOK_SECRET"
DEFAULT_SECRET = "whsec_killpoint_test_secret"


def types_of(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """The event types an effect announces, from its object before (None: new) and after."""
    kind = after["object"]
    if kind in ("customer", "refund"):
        if before is None:
            return [f"{kind}.created"] + (["charge.refunded"] if kind == "refund" else [])
        return [f"{kind}.updated"]
    if kind == "charge":
        return ["charge.succeeded"]
    was = before["status"] if before is not None else None
    out = ["payment_intent.created"] if before is None else []
    if after["status"] == was:
        return out
    if after["status"] == "succeeded":
        out += ["charge.captured" if was == "requires_capture" else "charge.succeeded", "payment_intent.succeeded"]
    elif after["status"] == "requires_capture":
        out += ["charge.succeeded", "payment_intent.amount_capturable_updated"]
    elif after["status"] == "canceled":
        out.append("payment_intent.canceled")
    return out


def events_of(effect: dict[str, Any], before: Store, after: Store, webhook: bool = False) -> list[dict[str, Any]]:
    """The events of one effect, given the run's objects before it and after it."""
    obj = effect["response"]
    old = before.get(obj["object"], obj["id"])
    out = []
    for kind in types_of(old, obj):
        subject = obj
        if kind.startswith("charge."):
            charge_id = obj["charge"] if obj["object"] == "refund" else obj.get("latest_charge", obj["id"])
            subject = after.get("charge", charge_id) or obj
        out.append({
            "id": f"evt_{digest({'effect': effect['id'], 'type': kind}, 24)}", "object": "event",
            "api_version": API_VERSION, "created": CREATED, "data": {"object": subject}, "livemode": False,
            "pending_webhooks": 1 if webhook else 0,
            "request": {"id": f"req_{effect['attempt']:012d}", "idempotency_key": effect["key"]}, "type": kind,
        })
    return out


def run_events(journal: Any, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run, newest first."""
    effects = journal.effects_of(SERVICE, run_id)
    responses = [e["response"] for e in effects]
    out: list[dict[str, Any]] = []
    for i, effect in enumerate(effects):
        out += events_of(effect, Store(responses[:i], set()), Store(responses[:i + 1], set()), bool(webhook_url(run_id)))
    return out[::-1]


def webhook_url(run_id: str) -> str | None:
    url = os.environ.get(URL_VAR, "").strip()
    return url.replace("{run_id}", run_id) if url else None


def announce(journal: Any, run_id: str, effect_id: str) -> None:
    """Send the events of the run's effect ``effect_id`` to the webhook URL, if one is set."""
    url = webhook_url(run_id)
    if url is None:
        return
    effects = journal.effects_of(SERVICE, run_id)
    index = next((i for i, e in enumerate(effects) if e["id"] == effect_id), None)
    if index is None:
        return
    responses = [e["response"] for e in effects]
    events = events_of(effects[index], Store(responses[:index], set()), Store(responses[:index + 1], set()), True)
    secret = os.environ.get(SECRET_VAR) or DEFAULT_SECRET
    items = []
    for event in events:
        body = json.dumps(event, indent=2).encode("utf-8")
        items.append((event["type"], body, {"Stripe-Signature": webhooks.stripe_signature(body, secret)}))
    webhooks.deliver(url, items)
