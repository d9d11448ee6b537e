"""Signed webhook deliveries: Stripe's ``Stripe-Signature`` scheme, and a sender that POSTs off the request path.

Signing, as Stripe documents it and ``stripe.Webhook.construct_event(payload, sig_header, secret)``
verifies it: ``Stripe-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<payload>" keyed by the
secret>``. The time is the time of sending (the SDK refuses a signature older than 5 minutes).

Sending: :func:`deliver` POSTs each payload, in order, from one daemon thread per call, so the request
that caused them is answered first. One try each, 5 s timeout; what happened is kept in ``DELIVERIES``
(URL, event type, status or error), for tests and for a user's question "was it sent?". A receiver that
is down loses the event (Stripe would retry for days; a crash test has no days).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

TIMEOUT_SECONDS = 5.0


def stripe_signature(payload: bytes, secret: str, timestamp: int | None = None) -> str:
    """The ``Stripe-Signature`` header for ``payload``, signed with ``secret`` at ``timestamp`` (now)."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode("utf-8"), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


@dataclass(frozen=True)
class Delivery:
    """One POST: where, what (a label such as the event type), and the status (None: ``error`` says why)."""

    url: str
    label: str
    status: int | None
    error: str | None = None


DELIVERIES: list[Delivery] = []
"""Every delivery this process made, in order (appended by the sending threads)."""
_lock = threading.Lock()


def post(url: str, body: bytes, headers: dict[str, str], label: str) -> Delivery:
    """POST ``body`` to ``url`` once; the delivery, also appended to ``DELIVERIES``."""
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json; charset=utf-8", **headers})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:
            done = Delivery(url, label, answer.status)
    except urllib.error.HTTPError as exc:
        done = Delivery(url, label, exc.code)
    except (OSError, ValueError) as exc:
        done = Delivery(url, label, None, f"{type(exc).__name__}: {exc}")
    with _lock:
        DELIVERIES.append(done)
    return done


def deliver(url: str, items: Sequence[tuple[str, bytes, dict[str, str]]]) -> threading.Thread:
    """POST each ``(label, body, headers)`` to ``url`` in order, from a new daemon thread (returned, started)."""
    def run() -> None:
        for label, body, headers in items:
            post(url, body, headers, label)

    thread = threading.Thread(target=run, name="fake-webhook-delivery", daemon=True)
    thread.start()
    return thread
