"""The fake Resend: Emails (send, get, list, update, cancel), Batch and Contacts, as the ``resend`` SDK calls them.

Point the SDK at the run's base URL (the SDK appends ``/emails`` to ``resend.api_url``, so the per-run
prefix works)::

    import resend
    resend.api_key = "re_x"
    resend.api_url = svc.url("resend", run_id)    # the SDK reads RESEND_API_URL once, at import
    resend.Emails.send({"from": "a@x.dev", "to": ["b@y.dev"], "subject": "hi", "html": "<p>hi</p>"},
                       {"idempotency_key": "invoice-42"})

``POST /emails``: JSON ``from``, ``to`` (an address or a list of 1 to 50), ``subject`` required; ``html``,
``text``, ``cc``, ``bcc``, ``reply_to``, ``tags``, ``scheduled_at``, ... accepted and kept.
``Authorization: Bearer <key>`` is required. Answer ``{"id": "<uuid>"}``, the id derived from (run, key).
``POST /emails/batch``: a list of such emails, each an effect (``resend_batch.py``).
``GET /emails/{id}``: ``{"object": "email", "id", "from", "to", "subject", ..., "last_event"}``
(``delivered``, ``scheduled``, ``canceled``); ``GET /emails``: ``{"object": "list", "has_more", "data"}``,
newest first, ``limit`` / ``after`` / ``before``. Reads are not recorded; unknown -> 404 ``not_found``.
``PATCH /emails/{id}`` (``scheduled_at``) and ``POST /emails/{id}/cancel``: a scheduled email only (else
422 ``validation_error``); answer ``{"object": "email", "id"}``.
Contacts, under ``/contacts``, ``/audiences/{id}/contacts`` or ``/segments/{id}/contacts`` (one set of
contacts: audiences are not kept apart): ``POST`` (``email`` required, ``first_name``, ``last_name``,
``unsubscribed``), ``GET`` (list), ``GET`` / ``PATCH`` / ``DELETE .../{id or email}``.
Anything else: 404 ``not_found`` naming the method and path. State: ``resend_store.py``.

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

from collections.abc import Callable
from typing import Any, ClassVar

from .effects import Dialect, EffectSpec, Problem, Refused, endpoint, has_bearer
from .resend_batch import batch_endpoint
from .resend_store import SERVICE, Store
from .server import Endpoint, Route
from .wire import Reply, Request

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


def recipients(value: Any) -> list[str] | None:
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
    if recipients(payload["to"]) is None:
        return Problem(f"Invalid `to` field: an address or a list of 1 to {MAX_RECIPIENTS} addresses.", param="to")
    if not isinstance(payload["subject"], str):
        return Problem("Invalid `subject` field: a string is required.", param="subject")
    return None


def authorized(answer: Callable[[Request, Store], Reply]) -> Endpoint:
    """A read: the key checked, the run's emails and contacts read, ``answer`` (not recorded)."""

    def read(request: Request) -> Reply:
        if not has_bearer(request.headers):
            return RESEND.error("unauthenticated", "Missing API key in the authorization header.")
        return answer(request, Store.of(request.state.journal, request.run_id))

    return read


def listing(rows: list[dict[str, Any]], query: dict[str, str]) -> Reply:
    """Resend's list: newest first; ``limit`` (1 to 100, default 20), ``after`` / ``before`` an id."""
    limit = query.get("limit", "20")
    if not (limit.isdigit() and 1 <= int(limit) <= 100):
        return RESEND.error("invalid", Problem("The `limit` parameter must be between 1 and 100.", param="limit"))
    ids = [r["id"] for r in rows]
    if query.get("after") in ids:
        rows = rows[ids.index(query["after"]) + 1:]
    elif query.get("before") in ids:
        rows = rows[:ids.index(query["before"])][-int(limit):]
    return RESEND.ok({"object": "list", "has_more": len(rows) > int(limit), "data": rows[:int(limit)]}, None)


def get_email(request: Request, store: Store) -> Reply:
    found = store.emails.get(request.params["id"])
    return RESEND.ok(found, None) if found else RESEND.error("not_found", "Email not found")


def list_emails(request: Request, store: Store) -> Reply:
    return listing(list(reversed(store.emails.values())), request.query)


def get_contact(request: Request, store: Store) -> Reply:
    found = store.contact(request.params["id"])
    return RESEND.ok(found, None) if found else RESEND.error("not_found", "Contact not found")


def list_contacts(request: Request, store: Store) -> Reply:
    return listing(list(reversed(store.contacts.values())), request.query)


# changes to an email or a contact -----------------------------------------------------------------


def scheduled_email(request: Request, payload: Any) -> dict[str, Any]:
    """The email in the path, which must exist and be scheduled (else 404 / 422)."""
    if request.headers.get("idempotency-key") in applied_keys(request):
        return {}  # a replay: the journal answers it
    found = Store.of(request.state.journal, request.run_id).emails.get(request.params["id"])
    if found is None:
        raise Refused(Problem("Email not found", kind="not_found"))
    if found["last_event"] != "scheduled":
        raise Refused(Problem(f"Email is {found['last_event']}: only a scheduled email can be changed or canceled.",
                              code="validation_error"))
    return found


def existing_contact(request: Request, payload: Any) -> dict[str, Any]:
    found = Store.of(request.state.journal, request.run_id).contact(request.params["id"])
    if found is None:
        raise Refused(Problem("Contact not found", kind="not_found"))
    return found


def applied_keys(request: Request) -> set[str]:
    return {e["key"] for e in request.state.journal.effects_of(SERVICE, request.run_id) if e["key"]}


def validate_contact(payload: Any) -> Problem | None:
    if not isinstance(payload, dict):
        return Problem("The body must be a JSON object.")
    if not (isinstance(payload.get("email"), str) and "@" in payload["email"]):
        return required("email")
    return None


def any_object(payload: Any) -> Problem | None:
    return None if payload is None or isinstance(payload, dict) else Problem("The body must be a JSON object.")


def resend_spec(validate: Any, respond: Any, resolve: Any = None) -> EffectSpec:
    return EffectSpec(service=SERVICE, idempotent=True, id_prefix="", validate=validate, respond=respond,
                      auth=True, resolve=resolve, dialect=RESEND, uuid_ids=True)


EMAIL = resend_spec(validate_email, lambda payload, new_id, context: {"id": new_id})
CANCEL = resend_spec(any_object, lambda p, i, found: {"object": "email", "id": found.get("id")}, scheduled_email)
UPDATE = resend_spec(any_object, lambda p, i, found: {"object": "email", "id": found.get("id")}, scheduled_email)
CONTACT = resend_spec(validate_contact, lambda p, new_id, c: {"object": "contact", "id": new_id})
CONTACT_UPDATE = resend_spec(any_object, lambda p, i, found: {"object": "contact", "id": found["id"]},
                             existing_contact)
CONTACT_REMOVE = resend_spec(any_object, lambda p, i, found: {"object": "contact", "contact": found["id"],
                                                                "deleted": True}, existing_contact)


def contact_routes(prefix: str) -> dict[str, Route]:
    return {
        f"{prefix}/contacts": {"POST": endpoint(CONTACT), "GET": authorized(list_contacts)},
        f"{prefix}/contacts/{{id}}": {"GET": authorized(get_contact), "PATCH": endpoint(CONTACT_UPDATE),
                                      "DELETE": endpoint(CONTACT_REMOVE)},
    }


ROUTES: dict[str, Route] = {
    "/emails": {"POST": endpoint(EMAIL), "GET": authorized(list_emails)},
    "/emails/batch": batch_endpoint(EMAIL, validate_email, RESEND),
    "/emails/{id}": {"GET": authorized(get_email), "PATCH": endpoint(UPDATE)},
    "/emails/{id}/cancel": endpoint(CANCEL),
    **contact_routes(""),
    **contact_routes("/audiences/{audience}"),
    **contact_routes("/segments/{segment}"),
}


def unknown(method: str, route: str) -> Reply:
    """What Resend answers a request it does not serve: 404 ``not_found`` naming it."""
    return RESEND.error("not_found", f"The requested endpoint does not exist: {method} {route}.")
