"""The fake Stripe: PaymentIntents, Charges, Refunds, Customers and Events, as the ``stripe`` SDK calls them.

Point the SDK at the run's base URL; the SDK appends ``/v1/...`` to it, so the per-run prefix works::

    client = stripe.StripeClient("sk_test_x", base_addresses={"api": svc.url("stripe", run_id)})
    # or, module-global:  stripe.api_key = "sk_test_x"; stripe.api_base = svc.url("stripe", run_id)

Requests are form-encoded as the SDK sends them (``metadata[k]=v``, ``expand[0]=x``; every value a string);
a JSON body is accepted too. ``Authorization: Bearer <key>`` is required (401 otherwise).

=========================================  ========================================================
``POST /v1/payment_intents``               ``amount``, ``currency``; optional ``customer`` (which must
                                           exist), ``description``, ``metadata``, ``payment_method``,
                                           ``payment_method_types``, ``capture_method``, ``confirm``
                                           (needs a payment method). Status ``requires_payment_method``,
                                           ``requires_confirmation``, or once confirmed ``succeeded``
                                           (``requires_capture`` for ``capture_method=manual``) with
                                           ``latest_charge`` naming its charge (``ch_<intent id>``).
``POST /v1/payment_intents/{id}/confirm``  optional ``payment_method``; ``/capture`` optional
                                           ``amount_to_capture``; ``/cancel`` optional
                                           ``cancellation_reason``.
``POST /v1/charges``                       ``amount``, ``currency``, and ``source`` or ``customer``.
``POST /v1/refunds``                       ``charge`` or ``payment_intent``, optional ``amount`` (default:
                                           what is left), ``reason``, ``metadata``.
``POST /v1/refunds/{id}/cancel``           a refund waiting for the customer (``requires_action``).
``POST /v1/customers``, ``/{id}``          create; update (metadata merged, ``""`` unsets).
``GET /v1/<objects>``, ``/{id}``           list (newest first, paged, filtered), retrieve, for
                                           ``payment_intents``, ``charges``, ``refunds``, ``customers``,
                                           ``events``; ``GET /v1/<objects>/search`` for the first two and
                                           customers (``stripe_reads.py``). A read is not an attempt.
anything else                              404 ``Unrecognized request URL (GET: /v1/...)``.
=========================================  ========================================================

What a run holds, and its seed (``KILLPOINT_STRIPE_SEED``): ``stripe_store.py``. The refusal rules
(``charge_already_refunded``, ``amount_too_large``, ``payment_intent_unexpected_state``, ...):
``stripe_rules.py``. Objects and their fields: ``stripe_objects.py``. Events and signed webhooks
(``KILLPOINT_STRIPE_WEBHOOK_URL``, ``KILLPOINT_STRIPE_WEBHOOK_SECRET``): ``stripe_events.py``.

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
Every POST that changes something is an attempt and, applied, an effect whose response is the object as
the request left it; the attempt's ``path`` names the endpoint (``/v1/payment_intents/pi_…/confirm``).

Objects are deterministic: ids derived from (run, key), ``created`` a fixed time, ``livemode`` false.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode

from . import stripe_events as events
from . import stripe_objects as so
from . import stripe_reads as reads
from . import stripe_rules as rules
from .effects import Dialect, EffectSpec, Problem, Refused, endpoint, has_bearer
from .server import Endpoint, Route
from .stripe_store import SERVICE, Store
from .wire import BadRequest, Reply, Request


class StripeDialect(Dialect):
    """Stripe's error shape and statuses (see the module docstring)."""

    STATUS: ClassVar[dict[str, int]] = {**Dialect.STATUS, "conflict": 400, "overload": 429, "unrecognized": 404}
    TYPE: ClassVar[dict[str, str]] = {
        "invalid": "invalid_request_error", "unrecognized": "invalid_request_error", "unauthenticated": "invalid_request_error",
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


def query_params(request: Request) -> dict[str, Any]:
    """A GET's query string as nested parameters (``expand[0]=x`` -> ``{"expand": ["x"]}``)."""
    try:
        return decode_form(urlencode(list(request.query.items())))
    except BadRequest:
        return dict(request.query)


# effects ----------------------------------------------------------------------------------------


def spec(id_prefix: str, validate: Any, respond: Any, resolve: Any = None) -> EffectSpec:
    return EffectSpec(
        service=SERVICE, idempotent=True, id_prefix=id_prefix, validate=validate, respond=respond, parse=parse,
        fingerprint=endpoint_and_params, auth=True, resolve=resolve, dialect=STRIPE,
    )


def as_resolved(params: Any, new_id: str, context: Any) -> dict[str, Any]:
    """An action's answer: the object its resolver left (its effect's own id is not the object's)."""
    return dict(context)


PAYMENT_INTENT = spec("pi", rules.validate_payment_intent, lambda p, i, c: so.payment_intent(p, i),
                      rules.resolve_creation)
CHARGE = spec("ch", rules.validate_charge, lambda p, i, c: so.charge(p, i), rules.resolve_creation)
REFUND = spec("re", rules.validate_refund, lambda p, i, c: so.refund(p, i, c["charge"], c["amount"], c["status"]),
              rules.resolve_refund)
CUSTOMER = spec("cus", rules.validate_customer, lambda p, i, c: so.customer(p, i))
CONFIRM = spec("confirm", rules.check_object, as_resolved, rules.resolve_confirm)
CAPTURE = spec("capture", rules.validate_capture, as_resolved, rules.resolve_capture)
CANCEL_INTENT = spec("cancel", rules.check_object, as_resolved, rules.resolve_cancel_intent)
CANCEL_REFUND = spec("cancel", rules.check_object, as_resolved, rules.resolve_cancel_refund)
UPDATE_CUSTOMER = spec("update", rules.validate_customer, as_resolved, rules.resolve_customer_update)

NEW_EFFECT = ("applied", "dropped", "injected-error")
"""Outcomes of an attempt that applied something (with an ``effect_id``): its events are announced."""


def effect_endpoint(effect_spec: EffectSpec) -> Endpoint:
    """The flow of ``effects.py`` for ``effect_spec``, then: ``expand`` applied to a 200 answer, and the
    events of a new effect announced (``stripe_events``)."""
    flow = endpoint(effect_spec)

    def serve(request: Request) -> Reply:
        reply = flow(request)
        attempt = request.attempt
        if attempt is not None and attempt["outcome"] in NEW_EFFECT and "effect_id" in attempt:
            events.announce(request.state.journal, request.run_id, attempt["effect_id"])
        if reply.status == 200 and b"expand" in request.body:
            params = parse(request)
            store = Store.of(request.state.journal, request.run_id)
            body = reads.expand(json.loads(reply.body), params.get("expand"), store)
            reply = Reply.json(200, body, reply.headers)
        return reply

    return serve


# reads ------------------------------------------------------------------------------------------


def read(answer: Callable[[Request, Store, dict[str, Any]], dict[str, Any]]) -> Endpoint:
    """A GET: the key checked, the run's objects read, ``answer`` (``Refused`` -> Stripe's error), ``expand``."""

    def get(request: Request) -> Reply:
        if not has_bearer(request.headers):
            return STRIPE.error("unauthenticated", "You did not provide an API key.")
        params = query_params(request)
        store = Store.of(request.state.journal, request.run_id)
        try:
            found = answer(request, store, params)
            return STRIPE.ok(reads.expand(found, params.get("expand"), store), None)
        except Refused as exc:
            return STRIPE.error(exc.problem.kind, exc.problem)

    return get


_SAFE_ID = re.compile(r"^[A-Za-z0-9_\-]+$")


def retrieve(kind: str) -> Endpoint:
    """``GET /v1/<objects>/{id}``: the object of ``kind`` with that id, as it stands in this run."""

    def answer(request: Request, store: Store, params: dict[str, Any]) -> dict[str, Any]:
        object_id = request.params["id"]
        found = store.get(kind, object_id)
        if found is None:
            shown = object_id if _SAFE_ID.match(object_id) else "?"
            raise Refused(Problem(f"No such {kind}: '{shown}'", param="id", kind="not_found"))
        return found

    return read(answer)


def listed(kind: str) -> Endpoint:
    return read(lambda request, store, params: reads.listing(store.all(kind), kind, params, request.route))


def searched(kind: str) -> Endpoint:
    return read(lambda request, store, params: reads.search(store.all(kind), kind, params, request.route))


def event_list(request: Request, store: Store, params: dict[str, Any]) -> dict[str, Any]:
    return reads.listing(events.run_events(request.state.journal, request.run_id), "event", params, request.route)


def event_get(request: Request, store: Store, params: dict[str, Any]) -> dict[str, Any]:
    for event in events.run_events(request.state.journal, request.run_id):
        if event["id"] == request.params["id"]:
            return event
    raise Refused(Problem(f"No such event: '{request.params['id']}'", param="id", kind="not_found"))


def unknown(method: str, route: str) -> Reply:
    """What Stripe answers a request it does not serve: 404 ``invalid_request_error`` naming it."""
    return STRIPE.error("unrecognized", f"Unrecognized request URL ({method}: {route}). Please see "
                        "https://stripe.com/docs or we can help at https://support.stripe.com/.")


def objects(name: str, kind: str, spec_: EffectSpec, search: bool = True) -> dict[str, Route]:
    """The routes of one kind of object: create and list, search, retrieve."""
    routes: dict[str, Route] = {f"/v1/{name}": {"POST": effect_endpoint(spec_), "GET": listed(kind)}}
    if search:
        routes[f"/v1/{name}/search"] = {"GET": searched(kind)}
    routes[f"/v1/{name}/{{id}}"] = {"GET": retrieve(kind)}
    return routes


ROUTES: dict[str, Route] = {
    **objects("payment_intents", "payment_intent", PAYMENT_INTENT),
    "/v1/payment_intents/{id}/confirm": effect_endpoint(CONFIRM),
    "/v1/payment_intents/{id}/capture": effect_endpoint(CAPTURE),
    "/v1/payment_intents/{id}/cancel": effect_endpoint(CANCEL_INTENT),
    **objects("charges", "charge", CHARGE),
    **objects("refunds", "refund", REFUND, search=False),
    "/v1/refunds/{id}/cancel": effect_endpoint(CANCEL_REFUND),
    **objects("customers", "customer", CUSTOMER),
    "/v1/events": {"GET": read(event_list)},
    "/v1/events/{id}": {"GET": read(event_get)},
}
ROUTES["/v1/customers/{id}"] = {"GET": retrieve("customer"), "POST": effect_endpoint(UPDATE_CUSTOMER)}
