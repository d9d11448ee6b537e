"""The fake mailer (``POST /v1/emails``, idempotent) and the webhook (``POST /v1/webhooks``, not).

Mailer body: ``{"to": "a@example.com", "template": "invoice", "data": {...}}`` (``recipient`` is
accepted for ``to``; ``data`` is optional, an object). Header ``Idempotency-Key`` makes it idempotent:
the same key with the same body is answered with the original response, with another body 422.
Without the header every request sends an email. Answer: ``{"id": "em_...", "status": "sent"}``.

Webhook body: any JSON value. There is no idempotency: every request is applied, even with the same
Idempotency-Key (which is recorded but ignored) -- the negative control. Answer: ``{"ok": true}``.
"""

from __future__ import annotations

from typing import Any

from .effects import EffectSpec, endpoint, require_object, require_str


def validate_email(payload: Any) -> str | None:
    problem = require_object(payload) or require_str(payload, "to", "recipient") or require_str(payload, "template")
    if problem is None and not isinstance(payload.get("data", {}), dict):
        problem = "'data' must be an object"
    return problem


MAILER = EffectSpec(
    service="mailer", idempotent=True, id_prefix="em", validate=validate_email,
    respond=lambda payload, new_id, context: {"id": new_id, "status": "sent"},
)

WEBHOOK = EffectSpec(
    service="webhook", idempotent=False, id_prefix="wh", validate=lambda payload: None,
    respond=lambda payload, new_id, context: {"ok": True},
)

ROUTES = {"/v1/emails": endpoint(MAILER), "/v1/webhooks": endpoint(WEBHOOK)}
