"""The one flow every effect endpoint shares (mailer, ledger, webhook).

For each request:

1. record the attempt (``pending``); a body that fails validation -> 400, ``rejected``;
2. hook and static faults at ``effect.received``: error/overload -> 503, drop -> reset; nothing applied;
3. apply atomically, keyed by (service, run, Idempotency-Key) when the service is idempotent:
   a seen key with the same payload -> 200 with the original response and ``Idempotent-Replayed: true``
   (``deduplicated``); a seen key with another payload -> 422 (``rejected``);
4. hook and static faults at ``effect.applied`` (only for a request that applied something):
   drop -> reset (``dropped``, the effect stays), error -> 500 (``injected-error``, the effect stays);
5. otherwise 200 with the response (``applied``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .canon import digest
from .wire import BadRequest, Reply, Request, error_body

Validator = Callable[[Any], str | None]
Responder = Callable[[Any, str], dict[str, Any]]

CONFLICT_MESSAGE = (
    "Keys for idempotent requests can only be used with the same parameters they were first used with."
)


@dataclass(frozen=True)
class EffectSpec:
    """One effect endpoint: its service name, whether it honours Idempotency-Key, how it validates a
    payload (error message or None), its id prefix and how it builds its response from (payload, id)."""

    service: str
    idempotent: bool
    id_prefix: str
    validate: Validator
    respond: Responder


def effect_id(spec: EffectSpec, run_id: str, seed: str) -> str:
    """A deterministic id: the same (service, run, key) gives the same id on any replay."""
    return f"{spec.id_prefix}_{digest({'service': spec.service, 'run': run_id, 'seed': seed}, 20)}"


def info_for(request: Request, attempt: dict[str, Any]) -> dict[str, Any]:
    """What the hook is told about a request (see ``hooks.py``)."""
    return {
        "service": attempt["service"], "run_id": request.run_id, "key": attempt["key"],
        "path": request.path, "payload_digest": attempt["payload_digest"],
        "headers": dict(request.headers), "order": attempt["order"],
    }


def handle_effect(spec: EffectSpec, request: Request) -> Reply:
    """Run the flow in the module docstring for one request."""
    journal = request.state.journal
    key = request.headers.get("idempotency-key")
    payload: Any = None
    try:
        payload = request.json()
        problem = spec.validate(payload)
    except BadRequest as exc:  # unparsable body: still an attempt, rejected
        problem = exc.message
    attempt = journal.begin(spec.service, request.run_id, key, digest(payload), request.route)
    request.attempt = attempt

    def finish(outcome: str, reply: Reply, **extra: Any) -> Reply:
        journal.finish(attempt, outcome, None if reply.drop else reply.status, **extra)
        reply.attempt = attempt
        return reply

    if problem is not None:
        return finish("rejected", Reply.json(400, error_body("invalid_request_error", problem)))
    info = info_for(request, attempt)
    decision = request.state.decide("effect.received", info)
    if decision.action == "drop":
        return finish("dropped", Reply.dropped())
    if decision.action != "go":
        message = f"fake {spec.service}: injected {decision.action} before applying"
        return finish("injected-error", Reply.json(503, error_body("service_unavailable", message)))

    def respond(seed: str) -> tuple[str, dict[str, Any]]:
        new_id = effect_id(spec, request.run_id, seed)
        return new_id, spec.respond(payload, new_id)

    kind, effect = journal.apply(attempt, payload, spec.idempotent, respond)
    if kind == "conflict":
        reply = Reply.json(422, error_body("idempotency_error", CONFLICT_MESSAGE))
        return finish("rejected", reply, effect_id=effect["id"])
    if kind == "deduplicated":
        reply = Reply.json(200, effect["response"], {"Idempotent-Replayed": "true"})
        return finish("deduplicated", reply, effect_id=effect["id"])
    decision = request.state.decide("effect.applied", {**info, "effect_id": effect["id"]})
    if decision.action == "drop":
        return finish("dropped", Reply.dropped(), effect_id=effect["id"])
    if decision.action != "go":
        message = f"fake {spec.service}: injected {decision.action} after applying"
        reply = Reply.json(500, error_body("api_error", message))
        return finish("injected-error", reply, effect_id=effect["id"])
    return finish("applied", Reply.json(200, effect["response"]), effect_id=effect["id"])


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
