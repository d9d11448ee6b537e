"""The fake Stripe: PaymentIntents, Charges and Refunds (create and retrieve), as the ``stripe`` SDK calls them.

Point the SDK at the run's base URL; the SDK appends ``/v1/...`` to it, so the per-run prefix works::

    client = stripe.StripeClient("sk_test_x", base_addresses={"api": svc.url("stripe", run_id)})
    # or, module-global:  stripe.api_key = "sk_test_x"; stripe.api_base = svc.url("stripe", run_id)

Requests are form-encoded as the SDK sends them (``metadata[k]=v``, ``expand[0]=x``; every value a string);
a JSON body is accepted too. ``Authorization: Bearer <key>`` is required (401 otherwise).

=============================  ====================================================================
``POST /v1/payment_intents``   ``amount`` (a positive integer), ``currency`` (3 letters); optional
                               ``customer``, ``description``, ``metadata``, ``payment_method``,
                               ``payment_method_types``, ``confirm``. Status ``succeeded`` when
                               ``confirm=true`` (which needs a ``payment_method``), else
                               ``requires_confirmation`` with a payment method, else
                               ``requires_payment_method``.
``POST /v1/charges``           ``amount``, ``currency``, and ``source`` or ``customer``; status ``succeeded``.
``POST /v1/refunds``           ``charge`` or ``payment_intent`` (an object of this run; a payment intent
                               must have succeeded), optional ``amount`` (default: the whole amount; more
                               than the whole is refused), ``reason``, ``metadata``; status ``succeeded``.
``GET /v1/<objects>/<id>``     the object (``payment_intents``, ``charges``, ``refunds``); a charge shows
                               its refunds in ``amount_refunded`` and ``refunded``. A read is not an
                               attempt. Unknown -> 404 ``resource_missing``.
=============================  ====================================================================

Idempotency, as Stripe documents it: the SDK sends an ``Idempotency-Key`` with every POST (a random one
unless given ``options={"idempotency_key": ...}``, and the same one on its own retries). The same key with
the same parameters on the same endpoint gets the first response again, with ``Idempotent-Replayed: true``
and ``Original-Request: <request id of the first>``; the same key with other parameters, or on another
endpoint, gets 400 ``idempotency_error`` (``stripe.IdempotencyError``). Keys are scoped per run. One
difference: Stripe also replays a 500 it answered; here a failure injected after applying stands for a lost
answer, so a retry with the same key gets the object.

Errors have Stripe's shape ``{"error": {"type", "message", "param"?, "code"?}}`` and status, so the SDK
raises its own types: 400 ``invalid_request_error`` (``InvalidRequestError``, e.g. code
``parameter_missing``), 401 (``AuthenticationError``), 404 ``resource_missing``, an injected error 503/500
``api_error`` (``APIError``; the SDK retries 5xx when ``max_network_retries`` > 0), an injected overload 429
code ``rate_limit`` (``RateLimitError``). Every answer to a POST carries ``Request-Id: req_<order>``.

Objects are deterministic: ids derived from (run, key), ``created`` a fixed time, ``livemode`` false.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from .canon import digest
from .effects import Dialect, EffectSpec, Problem, Refused, endpoint, has_bearer
from .wire import BadRequest, Reply, Request

SERVICE = "stripe"
CREATED = 1735689600
"""``created`` of every object: 2025-01-01T00:00:00Z (a fixed time keeps replays and baselines equal)."""


class StripeDialect(Dialect):
    """Stripe's error shape and statuses (see the module docstring)."""

    STATUS: ClassVar[dict[str, int]] = {**Dialect.STATUS, "conflict": 400, "overload": 429}
    TYPE: ClassVar[dict[str, str]] = {
        "invalid": "invalid_request_error", "unauthenticated": "invalid_request_error",
        "not_found": "invalid_request_error", "conflict": "idempotency_error", "overload": "invalid_request_error",
        "unavailable": "api_error", "failed": "api_error",
    }

    def body(self, kind: str, status: int, problem: Problem) -> Any:
        error: dict[str, Any] = {"type": self.TYPE[kind], "message": problem.message}
        code = problem.code or {"overload": "rate_limit", "not_found": "resource_missing"}.get(kind)
        if code:
            error["code"] = code
        if problem.param:
            error["param"] = problem.param
        return {"error": error}

    def headers(self, order: int | None, original: dict[str, Any] | None = None) -> dict[str, str]:
        headers = {"Request-Id": f"req_{order:012d}"} if order is not None else {}
        if original is not None:
            headers.update({"Idempotent-Replayed": "true", "Original-Request": f"req_{original['attempt']:012d}"})
        return headers


STRIPE = StripeDialect()


# parsing ----------------------------------------------------------------------------------------


def decode_form(text: str) -> dict[str, Any]:
    """Stripe's form encoding as nested values: ``a[b]=1&c[0]=x&c[1]=y`` -> ``{"a": {"b": "1"}, "c": ["x", "y"]}``."""
    root: dict[str, Any] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        head, _, rest = key.partition("[")
        if not head or (rest and not rest.endswith("]")):
            raise BadRequest(f"malformed parameter name {key!r}")
        parts = [head] + (rest[:-1].split("][") if rest else [])
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part or str(len(node)), {})
            if not isinstance(node, dict):
                raise BadRequest(f"parameter {key!r} conflicts with another")
        last = parts[-1] or str(len(node))
        if isinstance(node.get(last), dict):
            raise BadRequest(f"parameter {key!r} conflicts with another")
        node[last] = value
    return _lists(root)


def _lists(value: Any) -> Any:
    """Dicts keyed 0..n-1 become lists, recursively."""
    if not isinstance(value, dict):
        return value
    value = {k: _lists(v) for k, v in value.items()}
    if value and all(k.isdigit() for k in value) and sorted(map(int, value)) == list(range(len(value))):
        return [value[str(i)] for i in range(len(value))]
    return value


def parse(request: Request) -> Any:
    """The request's parameters: the form body (or a JSON body)."""
    if "json" in request.headers.get("content-type", ""):
        return request.json()
    try:
        return decode_form(request.body.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadRequest("the body is not UTF-8") from None


def endpoint_and_params(route: str, payload: Any) -> Any:
    """What an idempotency key is bound to: the endpoint and the parameters."""
    return {"endpoint": route, "params": payload}


# validation -------------------------------------------------------------------------------------


def positive_int(value: Any) -> int | None:
    """``value`` as a positive integer (the SDK sends ``"1250"``), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    return None


def truthy(value: Any) -> bool:
    return value is True or value == "true"


def missing(name: str) -> Problem:
    return Problem(f"Missing required param: {name}.", param=name, code="parameter_missing")


def check_amount(payload: dict[str, Any], required: bool = True) -> Problem | None:
    if "amount" not in payload:
        return missing("amount") if required else None
    if positive_int(payload["amount"]) is None:
        return Problem("Invalid positive integer", param="amount", code="parameter_invalid_integer")
    return None


def check_money(payload: Any) -> Problem | None:
    if not isinstance(payload, dict):
        return Problem("the parameters must be an object")
    problem = check_amount(payload)
    if problem:
        return problem
    currency = payload.get("currency")
    if currency is None:
        return missing("currency")
    if not (isinstance(currency, str) and len(currency) == 3 and currency.isalpha()):
        return Problem(f"Invalid currency: {currency}.", param="currency", code="parameter_invalid_string")
    if "metadata" in payload and not isinstance(payload["metadata"], dict | str):
        return Problem("Invalid object", param="metadata", code="parameter_invalid_object")
    return None


def validate_payment_intent(payload: Any) -> Problem | None:
    problem = check_money(payload)
    if problem is None and truthy(payload.get("confirm")) and not payload.get("payment_method"):
        problem = Problem("You cannot confirm this PaymentIntent because it's missing a payment method.",
                          param="payment_method", code="payment_intent_unexpected_state")
    return problem


def validate_charge(payload: Any) -> Problem | None:
    problem = check_money(payload)
    if problem is None and not (payload.get("source") or payload.get("customer")):
        problem = Problem("Must provide source or customer.", code="missing")
    return problem


def validate_refund(payload: Any) -> Problem | None:
    if not isinstance(payload, dict):
        return Problem("the parameters must be an object")
    if not (payload.get("charge") or payload.get("payment_intent")):
        return Problem("One of the following params should be provided for this request: payment_intent or charge.",
                       code="parameter_missing")
    return check_amount(payload, required=False)


# objects ----------------------------------------------------------------------------------------


def metadata(payload: dict[str, Any]) -> dict[str, Any]:
    value = payload.get("metadata")
    return value if isinstance(value, dict) else {}


def payment_intent(payload: dict[str, Any], new_id: str, context: Any = None) -> dict[str, Any]:
    amount = positive_int(payload["amount"])
    if truthy(payload.get("confirm")):
        status = "succeeded"
    elif payload.get("payment_method"):
        status = "requires_confirmation"
    else:
        status = "requires_payment_method"
    return {
        "id": new_id, "object": "payment_intent", "amount": amount, "amount_capturable": 0,
        "amount_received": amount if status == "succeeded" else 0, "capture_method": "automatic",
        "client_secret": f"{new_id}_secret_{digest(new_id, 24)}", "confirmation_method": "automatic",
        "created": CREATED, "currency": payload["currency"].lower(), "customer": payload.get("customer"),
        "description": payload.get("description"), "latest_charge": None, "livemode": False,
        "metadata": metadata(payload), "payment_method": payload.get("payment_method"),
        "payment_method_types": payload.get("payment_method_types") or ["card"], "status": status,
    }


def charge(payload: dict[str, Any], new_id: str, context: Any = None) -> dict[str, Any]:
    amount = positive_int(payload["amount"])
    return {
        "id": new_id, "object": "charge", "amount": amount, "amount_captured": amount, "amount_refunded": 0,
        "captured": True, "created": CREATED, "currency": payload["currency"].lower(),
        "customer": payload.get("customer"), "description": payload.get("description"), "livemode": False,
        "metadata": metadata(payload), "paid": True, "payment_intent": None, "refunded": False,
        "source": payload.get("source"), "status": "succeeded",
    }


def refund(payload: dict[str, Any], new_id: str, context: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": new_id, "object": "refund", "amount": context["amount"], "charge": context["charge"],
        "created": CREATED, "currency": context["currency"], "metadata": metadata(payload),
        "payment_intent": context["payment_intent"], "reason": payload.get("reason"), "status": "succeeded",
    }


def resolve_refund(request: Request, payload: dict[str, Any]) -> dict[str, Any]:
    """The object a refund names, which must exist in this run: its amount, currency and ids."""
    param = "charge" if payload.get("charge") else "payment_intent"
    ref_id = payload[param]
    effect = request.state.journal.find_effect(SERVICE, request.run_id, str(ref_id))
    target = effect["response"] if effect is not None else None
    if target is None or target.get("object") != param:
        raise Refused(Problem(f"No such {param}: '{ref_id}'", param=param, code="resource_missing"))
    if param == "payment_intent" and target["status"] != "succeeded":
        raise Refused(Problem(f"This PaymentIntent ({ref_id}) does not have a successful charge to refund.",
                              param=param, code="charge_not_refundable"))
    amount = positive_int(payload["amount"]) if "amount" in payload else target["amount"]
    if amount is None or amount > target["amount"]:
        raise Refused(Problem(f"Refund amount ({amount}) is greater than the amount ({target['amount']}).",
                              param="amount", code="amount_too_large"))
    return {"amount": amount, "currency": target["currency"], "charge": ref_id if param == "charge" else None,
            "payment_intent": ref_id if param == "payment_intent" else None}


def spec(id_prefix: str, validate: Any, respond: Any, resolve: Any = None) -> EffectSpec:
    return EffectSpec(
        service=SERVICE, idempotent=True, id_prefix=id_prefix, validate=validate, respond=respond, parse=parse,
        fingerprint=endpoint_and_params, auth=True, resolve=resolve, dialect=STRIPE,
    )


PAYMENT_INTENT = spec("pi", validate_payment_intent, payment_intent)
CHARGE = spec("ch", validate_charge, charge)
REFUND = spec("re", validate_refund, refund, resolve_refund)


# retrieval --------------------------------------------------------------------------------------

_SAFE_ID = re.compile(r"^[A-Za-z0-9_\-]+$")


def retrieve(kind: str) -> Any:
    """``GET /v1/<objects>/{id}``: the object of ``kind`` with that id in this run (a read: not recorded)."""

    def get(request: Request) -> Reply:
        if not has_bearer(request.headers):
            return STRIPE.error("unauthenticated", "You did not provide an API key.")
        object_id = request.params["id"]
        effect = request.state.journal.find_effect(SERVICE, request.run_id, object_id)
        if effect is None or effect["response"].get("object") != kind:
            shown = object_id if _SAFE_ID.match(object_id) else "?"
            return STRIPE.error("not_found", Problem(f"No such {kind}: '{shown}'", param="id"))
        found = effect["response"]
        if kind == "charge":
            refunded = sum(r["response"]["amount"] for r in request.state.journal.effects_of(SERVICE, request.run_id)
                           if r["response"].get("object") == "refund" and r["response"].get("charge") == object_id)
            found.update(amount_refunded=refunded, refunded=refunded >= found["amount"])
        return STRIPE.ok(found, None)

    return get


ROUTES = {
    "/v1/payment_intents": endpoint(PAYMENT_INTENT),
    "/v1/payment_intents/{id}": {"GET": retrieve("payment_intent")},
    "/v1/charges": endpoint(CHARGE),
    "/v1/charges/{id}": {"GET": retrieve("charge")},
    "/v1/refunds": endpoint(REFUND),
    "/v1/refunds/{id}": {"GET": retrieve("refund")},
}
