"""The fake Resend: ``POST /emails`` (send one email, honouring ``Idempotency-Key``) as the ``resend`` SDK calls it.

Point the SDK at the run's base URL (the SDK appends ``/emails`` to ``resend.api_url``, so the per-run
prefix works)::

    import resend
    resend.api_key = "re_x"
    resend.api_url = svc.url("resend", run_id)    # the SDK reads RESEND_API_URL once, at import
    resend.Emails.send({"from": "a@x.dev", "to": ["b@y.dev"], "subject": "hi", "html": "<p>hi</p>"},
                       {"idempotency_key": "invoice-42"})

``POST /emails``: JSON ``from``, ``to`` (an address or a list of 1 to 50), ``subject`` required; ``html``,
``text``, ``cc``, ``bcc``, ``reply_to``, ``tags``, ... accepted and kept. ``Authorization: Bearer <key>``
is required. Answer ``{"id": "<uuid>"}``, the id derived from (run, key).
``GET /emails/{id}``: the email sent, as ``{"object": "email", "id", "from", "to", "subject", ...,
"last_event": "delivered"}`` (a read: not recorded); unknown -> 404 ``not_found``.

Idempotency, as Resend documents it: the same ``Idempotency-Key`` with the same payload gets the first
response again (here also with ``Idempotent-Replayed: true``); with another payload, 409
``invalid_idempotent_request``. Keys are scoped per run.

Errors have Resend's shape ``{"statusCode", "message", "name"}``, so the SDK raises its own types:
401 ``missing_api_key`` (``MissingApiKeyError``), 422 ``missing_required_field``
(``MissingRequiredFieldsError``) or ``validation_error`` (``ValidationError``), 409
``invalid_idempotent_request`` (``ResendError``, ``error_type`` ``invalid_idempotent_request``), an injected
overload 429 ``rate_limit_exceeded`` (``RateLimitError``, with ``retry-after: 1``), an injected error 503 /
500 ``application_error`` (``ResendError`` / ``ApplicationError``). A dropped connection reaches the caller
as ``ResendError`` with ``error_type`` ``HttpClientError``. The Python SDK does not retry.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .effects import Dialect, EffectSpec, Problem, endpoint, has_bearer
from .wire import Reply, Request

SERVICE = "resend"
CREATED_AT = "2025-01-01 00:00:00.000000+00"
MAX_RECIPIENTS = 50
CONFLICT = ("Same idempotency key used with a different request payload. "
            "Change your idempotency key or payload.")


class ResendDialect(Dialect):
    """Resend's error shape and statuses (see the module docstring)."""

    STATUS: ClassVar[dict[str, int]] = {
        "invalid": 422, "unauthenticated": 401, "not_found": 404, "conflict": 409,
        "unavailable": 503, "overload": 429, "failed": 500,
    }
    TYPE: ClassVar[dict[str, str]] = {
        "invalid": "validation_error", "unauthenticated": "missing_api_key", "not_found": "not_found",
        "conflict": "invalid_idempotent_request", "unavailable": "application_error",
        "overload": "rate_limit_exceeded", "failed": "application_error",
    }

    def body(self, kind: str, status: int, problem: Problem) -> Any:
        message = CONFLICT if kind == "conflict" else problem.message
        return {"statusCode": status, "message": message, "name": problem.code or self.TYPE[kind]}

    def error(self, kind: str, problem: Problem | str, order: int | None = None,
              extra_headers: dict[str, str] | None = None) -> Reply:
        extra = {"retry-after": "1", **(extra_headers or {})} if kind == "overload" else extra_headers
        return super().error(kind, problem, order, extra)


RESEND = ResendDialect()


def required(name: str) -> Problem:
    return Problem(f"Missing `{name}` field.", param=name, code="missing_required_field")


def addresses(value: Any) -> list[str] | None:
    """``to`` as a list of addresses, or None if it is not one address or a list of 1..50."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_RECIPIENTS:
        return None
    return value if all(isinstance(a, str) and "@" in a for a in value) else None


def validate_email(payload: Any) -> Problem | None:
    if not isinstance(payload, dict):
        return Problem("The body must be a JSON object.")
    for name in ("from", "to", "subject"):
        if payload.get(name) in (None, "", []):
            return required(name)
    sender = payload["from"]
    if not (isinstance(sender, str) and "@" in sender):
        return Problem("Invalid `from` field. The email address needs to follow the `email@example.com` or "
                       "`Name <email@example.com>` format.", param="from", code="invalid_from_address")
    if addresses(payload["to"]) is None:
        return Problem(f"Invalid `to` field: an address or a list of 1 to {MAX_RECIPIENTS} addresses.", param="to")
    if not isinstance(payload["subject"], str):
        return Problem("Invalid `subject` field: a string is required.", param="subject")
    return None


EMAIL = EffectSpec(
    service=SERVICE, idempotent=True, id_prefix="", validate=validate_email,
    respond=lambda payload, new_id, context: {"id": new_id}, auth=True, dialect=RESEND, uuid_ids=True,
)


def get_email(request: Request) -> Reply:
    """``GET /emails/{id}``: the email with that id in this run (a read: not recorded)."""
    if not has_bearer(request.headers):
        return RESEND.error("unauthenticated", "Missing API key in the authorization header.")
    effect = request.state.journal.find_effect(SERVICE, request.run_id, request.params["id"])
    if effect is None:
        return RESEND.error("not_found", "Email not found")
    sent = effect["payload"]
    return RESEND.ok({
        "object": "email", "id": effect["id"], "from": sent["from"], "to": addresses(sent["to"]),
        "subject": sent["subject"], "html": sent.get("html"), "text": sent.get("text"), "cc": sent.get("cc"),
        "bcc": sent.get("bcc"), "reply_to": sent.get("reply_to"), "tags": sent.get("tags"),
        "created_at": CREATED_AT, "scheduled_at": None, "last_event": "delivered",
    }, None)


ROUTES = {"/emails": endpoint(EMAIL), "/emails/{id}": {"GET": get_email}}


def unknown(method: str, route: str) -> Reply:
    """What Resend answers a request it does not serve: 404 ``not_found`` naming it."""
    return RESEND.error("not_found", f"The requested endpoint does not exist: {method} {route}.")
