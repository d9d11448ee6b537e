"""The one flow every effect endpoint shares (mailer, ledger, webhook, Stripe, Resend).

For each request:

1. parse the body (``spec.parse``: JSON, or Stripe's form encoding) and record the attempt (``pending``),
   fingerprinted by ``spec.fingerprint``, with its endpoint (``POST /v1/refunds``: the effect's too); then refuse, with nothing applied (``rejected``): a missing
   API key when ``spec.auth`` (401), a body that fails ``spec.validate`` (400; the API's own status),
   a reference ``spec.resolve`` cannot find among the run's effects (a refund of an unknown charge);
2. hook and static faults at ``effect.received``: error -> 503, overload -> the API's overload answer
   (503; Stripe and Resend: 429), drop -> reset; nothing applied (``injected-error`` / ``dropped``);
3. apply atomically, keyed by (service, provider account, Idempotency-Key) when the service is idempotent
   (a run is its own account unless the harness shares one between runs: ``Journal.share_account``) (a spec with
   ``resolve`` resolves again first, under one lock with the apply, and may still refuse: ``rejected``):
   a seen key with the same fingerprint -> 200 with the original response and ``Idempotent-Replayed: true``
   (``deduplicated``); a seen key with another fingerprint -> the API's idempotency error (``rejected``):
   422 ``idempotency_error``; Stripe 400 ``idempotency_error``; Resend 409 ``invalid_idempotent_request``;
4. hook and static faults at ``effect.applied`` (only for a request that applied something):
   drop -> reset (``dropped``, the effect stays); error -> 500, overload -> the API's overload answer
   (503; Stripe and Resend: 429) (``injected-error``, the effect stays: the ambiguous failure, applied
   yet answered as failed);
5. otherwise 200 with the response (``applied``).

Every answer, error or not, is worded by the spec's :class:`Dialect` (status, body shape, headers), so each
API's SDK raises its own exception types.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .canon import digest, full_digest
from .wire import BadRequest, Reply, Request, error_body


@dataclass(frozen=True)
class Problem:
    """Why a request is refused: a message, and the parameter and code an API may name.

    ``kind`` picks the status through the dialect: ``invalid`` (a bad body) or ``not_found``.
    """

    message: str
    param: str | None = None
    code: str | None = None
    kind: str = "invalid"


class Refused(Exception):
    """Raised by a spec's ``resolve`` to refuse a request before anything is applied."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


Validator = Callable[[Any], "str | Problem | None"]
Responder = Callable[[Any, str, Any], dict[str, Any]]
"""``respond(payload, new_id, context)``: the response; ``context`` is what ``resolve`` returned."""
Resolver = Callable[[Request, Any], Any]

_RESOLVING = threading.Lock()
"""Held while a spec with ``resolve`` resolves again and applies (step 3): two requests on one object (two
refunds of a charge) are judged one after the other, never both against the state before either."""

CONFLICT_MESSAGE = (
    "Keys for idempotent requests can only be used with the same parameters they were first used with."
)


class Dialect:
    """How an API words its answers. This base is the plain shape of the mailer, ledger and webhook:
    ``{"error": {"type", "message"}}``; subclasses (Stripe, Resend) speak their API's shape.

    Kinds of error: ``invalid`` (400), ``unauthenticated`` (401), ``not_found`` (404), ``conflict``
    (idempotency, 422), ``unavailable`` (injected before applying, 503), ``overload`` (injected overload,
    before or after applying, 503), ``failed`` (injected error after applying, 500).
    """

    STATUS: ClassVar[dict[str, int]] = {
        "invalid": 400, "unauthenticated": 401, "not_found": 404, "conflict": 422,
        "unavailable": 503, "overload": 503, "failed": 500,
    }
    TYPE: ClassVar[dict[str, str]] = {
        "invalid": "invalid_request_error", "unauthenticated": "authentication_error", "not_found": "not_found",
        "conflict": "idempotency_error", "unavailable": "service_unavailable", "overload": "service_unavailable",
        "failed": "api_error",
    }

    def body(self, kind: str, status: int, problem: Problem) -> Any:
        """The error body of ``kind`` for ``problem``."""
        return error_body(self.TYPE[kind], problem.message)

    def headers(self, order: int | None, original: dict[str, Any] | None = None) -> dict[str, str]:
        """Headers for every answer to the attempt numbered ``order`` (None: not recorded, e.g. a read);
        ``original`` is the effect replayed, when the answer is a replay."""
        return {"Idempotent-Replayed": "true"} if original is not None else {}

    def error(self, kind: str, problem: Problem | str, order: int | None = None,
              extra_headers: dict[str, str] | None = None) -> Reply:
        """The reply for an error of ``kind``."""
        if isinstance(problem, str):
            problem = Problem(problem)
        status = self.STATUS[kind]
        headers = {**self.headers(order), **(extra_headers or {})}
        return Reply.json(status, self.body(kind, status, problem), headers)

    def ok(self, response: Any, order: int | None, original: dict[str, Any] | None = None) -> Reply:
        return Reply.json(200, response, self.headers(order, original))


PLAIN = Dialect()


def json_payload(request: Request) -> Any:
    """The body as JSON (``BadRequest`` if it is not)."""
    return request.json()


def whole_payload(route: str, payload: Any) -> Any:
    """What a payload's digest is taken of: the payload itself (the route does not count)."""
    return payload


@dataclass(frozen=True)
class EffectSpec:
    """One effect endpoint: its service name, whether it honours Idempotency-Key, how it validates a
    payload (a message or :class:`Problem`, or None), its id prefix and how it builds its response from
    (payload, id, context). Optional: how it parses a body, what its fingerprint covers (Stripe: the
    endpoint too, so a key reused on another endpoint is an idempotency error), whether it wants an API
    key, how it resolves references (``resolve(request, payload) -> context``, raising
    :class:`Refused`), how it words answers, and UUID ids (Resend)."""

    service: str
    idempotent: bool
    id_prefix: str
    validate: Validator
    respond: Responder
    parse: Callable[[Request], Any] = json_payload
    fingerprint: Callable[[str, Any], Any] = whole_payload
    auth: bool = False
    resolve: Resolver | None = None
    dialect: Dialect = field(default=PLAIN)
    uuid_ids: bool = False


def effect_id(spec: EffectSpec, run_id: str, seed: str) -> str:
    """A deterministic id: the same (service, run, key) gives the same id on any replay."""
    basis = {"service": spec.service, "run": run_id, "seed": seed}
    if spec.uuid_ids:
        return str(uuid.UUID(hex=full_digest(basis)[:32]))
    return f"{spec.id_prefix}_{digest(basis, 20)}"


def info_for(request: Request, attempt: dict[str, Any]) -> dict[str, Any]:
    """What the hook is told about a request (see ``hooks.py``); a ``Killpoint-Step`` header, which a
    worker may send to name the step a request belongs to, is passed on as ``step``."""
    info = {
        "service": attempt["service"], "run_id": request.run_id, "key": attempt["key"],
        "path": request.path, "payload_digest": attempt["payload_digest"],
        "headers": dict(request.headers), "order": attempt["order"], "peer": request.peer,
        "hung_up": request.hung_up,
    }
    step = request.headers.get(STEP_HEADER)
    if step:
        info["step"] = step
    return info


STEP_HEADER = "killpoint-step"
"""The request header naming its step (lower-case: the server lower-cases header names)."""


def has_bearer(headers: dict[str, str]) -> bool:
    """True when the request carries ``Authorization: Bearer <something>``."""
    value = headers.get("authorization", "")
    return value.startswith("Bearer ") and bool(value[len("Bearer "):].strip())


def finisher(journal: Any, attempt: dict[str, Any]) -> Callable[..., Reply]:
    """``finish(outcome, reply, **extra)``: ends ``attempt`` with that outcome and the reply's status (None
    for a drop) and returns the reply, which carries the attempt."""

    def finish(outcome: str, reply: Reply, **extra: Any) -> Reply:
        journal.finish(attempt, outcome, None if reply.drop else reply.status, **extra)
        reply.attempt = attempt
        return reply

    return finish


def handle_effect(spec: EffectSpec, request: Request) -> Reply:
    """Run the flow in the module docstring for one request."""
    journal = request.state.journal
    talk = spec.dialect
    key = request.headers.get("idempotency-key")
    payload: Any = None
    problem: str | Problem | None
    try:
        payload = spec.parse(request)
        problem = spec.validate(payload)
    except BadRequest as exc:  # unparsable body: still an attempt, rejected
        problem = exc.message
    attempt = journal.begin(spec.service, request.run_id, key, digest(spec.fingerprint(request.route, payload)),
                            request.route, request.method)
    request.attempt = attempt
    order = attempt["order"]

    finish = finisher(journal, attempt)
    if spec.auth and not has_bearer(request.headers):
        message = "No API key provided: send the header Authorization: Bearer <key>."
        return finish("rejected", talk.error("unauthenticated", message, order))
    if problem is not None:
        return finish("rejected", talk.error("invalid", problem, order))
    context = None
    if spec.resolve is not None:
        try:
            context = spec.resolve(request, payload)
        except Refused as exc:
            return finish("rejected", talk.error(exc.problem.kind, exc.problem, order))
    info = info_for(request, attempt)
    decision = request.state.decide("effect.received", info)
    if decision.action == "drop":
        return finish("dropped", Reply.dropped())
    if decision.action != "go":
        message = f"fake {spec.service}: injected {decision.action} before applying"
        kind = "overload" if decision.action == "overload" else "unavailable"
        return finish("injected-error", talk.error(kind, message, order))

    def respond(seed: str) -> tuple[str, dict[str, Any]]:
        new_id = effect_id(spec, request.run_id, seed)
        return new_id, spec.respond(payload, new_id, context)

    with _RESOLVING if spec.resolve is not None else nullcontext():
        if spec.resolve is not None:  # again: what the request refers to may have changed while it was held
            try:
                context = spec.resolve(request, payload)
            except Refused as exc:
                return finish("rejected", talk.error(exc.problem.kind, exc.problem, order))
        kind, effect = journal.apply(attempt, payload, spec.idempotent, respond)
    if kind == "conflict":
        return finish("rejected", talk.error("conflict", Problem(CONFLICT_MESSAGE), order), effect_id=effect["id"])
    if kind == "deduplicated":
        return finish("deduplicated", talk.ok(effect["response"], order, effect), effect_id=effect["id"])
    decision = request.state.decide("effect.applied", {**info, "effect_id": effect["id"]})
    if decision.action == "drop":
        return finish("dropped", Reply.dropped(), effect_id=effect["id"])
    if decision.action != "go":
        message = f"fake {spec.service}: injected {decision.action} after applying"
        kind = "overload" if decision.action == "overload" else "failed"
        return finish("injected-error", talk.error(kind, message, order), effect_id=effect["id"])
    return finish("applied", talk.ok(effect["response"], order), effect_id=effect["id"])


def endpoint(spec: EffectSpec) -> Callable[[Request], Reply]:
    """The endpoint function serving ``spec``."""
    return lambda request: handle_effect(spec, request)


def require_object(payload: Any) -> str | None:
    return None if isinstance(payload, dict) else "the body must be a JSON object"


def require_str(payload: dict[str, Any], *names: str) -> str | None:
    """None if one of ``names`` holds a non-empty string, else a message naming them."""
    if any(isinstance(payload.get(name), str) and payload[name] for name in names):
        return None
    return f"'{names[0]}' (a non-empty string) is required"
