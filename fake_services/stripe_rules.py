"""The fake Stripe's rules: which requests it refuses, and the object each accepted one leaves.

Two kinds of function, as ``effects.EffectSpec`` takes them:

- ``validate_*(params) -> Problem | None``: the parameters alone (400 ``invalid_request_error``, code
  ``parameter_missing`` ...), before anything else;
- ``resolve_*(request, params) -> object``: the run's objects as they stand (``stripe_store.Store``) decide;
  a refusal raises :class:`Refused` with Stripe's code; otherwise the object the request leaves (the new
  refund, the confirmed intent, ...), which ``respond`` answers. A request whose Idempotency-Key the run
  has already applied is not judged again (``None``): the journal replays the first answer or refuses
  the key (``effects.py``), as Stripe does before looking at the objects.

The refusals, with Stripe's codes and messages:

- a ``customer`` (intent, charge) or an object in the path that the run does not have: ``resource_missing``
  ("No such customer: 'cus_x'"; 400, or 404 for an object in the path);
- a refund of an intent that has not succeeded: ``charge_not_refundable``; of a charge refunded in full
  already: ``charge_already_refunded``; of more than is left: ``amount_too_large``;
- confirming an intent that is not waiting for confirmation or a payment method, capturing one that is not
  ``requires_capture``, canceling one that succeeded or was canceled: ``payment_intent_unexpected_state``;
  capturing more than was authorised: ``amount_too_large``;
- canceling a refund that is not ``requires_action``: ``invalid_request_error`` (no code), as Stripe says
  "Only refunds with a status of requires_action can be canceled".

A refund is ``succeeded`` at once, except a refund of a payment whose payment method types are
``customer_balance`` only, which is ``requires_action`` (Stripe waits for the customer's bank details):
the one kind of refund that can be canceled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import stripe_objects as so
from .effects import Problem, Refused
from .stripe_store import Store
from .wire import Request

Params = dict[str, Any]
Change = Callable[[dict[str, Any], Params], dict[str, Any]]


def missing(name: str) -> Problem:
    return Problem(f"Missing required param: {name}.", param=name, code="parameter_missing")


def no_such(kind: str, object_id: Any, param: str, in_path: bool = False) -> Refused:
    return Refused(Problem(f"No such {kind}: '{object_id}'", param=param, code="resource_missing",
                           kind="not_found" if in_path else "invalid"))


def unexpected(message: str) -> Refused:
    return Refused(Problem(message, code="payment_intent_unexpected_state"))


def money(amount: int, currency: str) -> str:
    return f"${amount / 100:.2f}" if currency == "usd" else f"{amount / 100:.2f} {currency.upper()}"


# validation -------------------------------------------------------------------------------------


def check_object(params: Any) -> Problem | None:
    if not isinstance(params, dict):
        return Problem("the parameters must be an object")
    if "metadata" in params and not isinstance(params["metadata"], dict | str):
        return Problem("Invalid object", param="metadata", code="parameter_invalid_object")
    return None


def check_amount(params: Params, required: bool = True, name: str = "amount") -> Problem | None:
    if name not in params:
        return missing(name) if required else None
    if so.positive_int(params[name]) is None:
        return Problem("Invalid positive integer", param=name, code="parameter_invalid_integer")
    return None


def check_money(params: Any) -> Problem | None:
    problem = check_object(params) or check_amount(params)
    if problem:
        return problem
    currency = params.get("currency")
    if currency is None:
        return missing("currency")
    if not (isinstance(currency, str) and len(currency) == 3 and currency.isalpha()):
        return Problem(f"Invalid currency: {currency}.", param="currency", code="parameter_invalid_string")
    return None


def validate_payment_intent(params: Any) -> Problem | None:
    problem = check_money(params)
    if problem is None and so.truthy(params.get("confirm")) and not params.get("payment_method"):
        problem = Problem("You cannot confirm this PaymentIntent because it's missing a payment method.",
                          param="payment_method", code="payment_intent_unexpected_state")
    return problem


def validate_charge(params: Any) -> Problem | None:
    problem = check_money(params)
    if problem is None and not (params.get("source") or params.get("customer")):
        problem = Problem("Must provide source or customer.", code="missing")
    return problem


def validate_refund(params: Any) -> Problem | None:
    problem = check_object(params)
    if problem is None and not (params.get("charge") or params.get("payment_intent")):
        return Problem("One of the following params should be provided for this request: payment_intent or charge.",
                       code="parameter_missing")
    return problem or check_amount(params, required=False)


def validate_capture(params: Any) -> Problem | None:
    return check_object(params) or check_amount(params, required=False, name="amount_to_capture")


def validate_customer(params: Any) -> Problem | None:
    problem = check_object(params)
    email = params.get("email") if problem is None else None
    if email and not (isinstance(email, str) and "@" in email):
        return Problem(f"Invalid email address: {email}", param="email", code="email_invalid")
    return problem


# resolution -------------------------------------------------------------------------------------


def store_unless_replayed(request: Request) -> Store | None:
    """The run's objects, or None when this request's key was applied already (a replay: no rule applies)."""
    store = Store.of(request.state.journal, request.run_id)
    key = request.headers.get("idempotency-key")
    return None if key is not None and key in store.keys else store


def check_customer(store: Store, params: Params) -> None:
    if params.get("customer") and store.get("customer", params["customer"]) is None:
        raise no_such("customer", params["customer"], "customer")


def resolve_creation(request: Request, params: Params) -> Store | None:
    """A PaymentIntent or charge: its customer, if named, must exist."""
    store = store_unless_replayed(request)
    if store is not None:
        check_customer(store, params)
    return store


def resolve_refund(request: Request, params: Params) -> dict[str, Any] | None:
    """The refund: of the charge named, or of the intent's charge; of what is left (or ``amount`` of it)."""
    store = store_unless_replayed(request)
    if store is None:
        return None
    if params.get("charge"):
        charge = store.get("charge", params["charge"])
        if charge is None:
            raise no_such("charge", params["charge"], "charge")
    else:
        ref = params["payment_intent"]
        intent = store.get("payment_intent", ref)
        if intent is None:
            raise no_such("payment_intent", ref, "payment_intent")
        if intent["status"] != "succeeded":
            raise Refused(Problem(f"This PaymentIntent ({ref}) does not have a successful charge to refund.",
                                  param="payment_intent", code="charge_not_refundable"))
        charge = store.get("charge", intent["latest_charge"])
        assert charge is not None
    left = charge["amount"] - charge["amount_refunded"]
    if left <= 0:
        raise Refused(Problem(f"Charge {charge['id']} has already been refunded.", code="charge_already_refunded"))
    amount = so.positive_int(params["amount"]) if "amount" in params else left
    assert amount is not None
    if amount > left:
        what = "charge amount" if charge["amount_refunded"] == 0 else "unrefunded amount on charge"
        raise Refused(Problem(f"Refund amount ({money(amount, charge['currency'])}) is greater than {what} "
                              f"({money(left, charge['currency'])})", param="amount", code="amount_too_large"))
    intent = store.get("payment_intent", charge["payment_intent"]) if charge["payment_intent"] else None
    waits = intent is not None and intent["payment_method_types"] == ["customer_balance"]
    return {"charge": charge, "amount": amount, "status": "requires_action" if waits else "succeeded"}


def acting_on(kind: str) -> Callable[[Change], Callable[[Request, Params], dict[str, Any] | None]]:
    """Make ``change(obj, params) -> new obj`` (raising :class:`Refused`) a resolver of the object of ``kind``
    named in the path: 404 ``resource_missing`` if the run has none; None for a replay."""

    def wrap(change: Change) -> Callable[[Request, Params], dict[str, Any] | None]:
        def resolve(request: Request, params: Params) -> dict[str, Any] | None:
            store = store_unless_replayed(request)
            if store is None:
                return None
            found = store.get(kind, request.params["id"])
            if found is None:
                raise no_such(kind, request.params["id"], "id", in_path=True)
            return change(found, params)

        return resolve

    return wrap


CONFIRMABLE = ("requires_payment_method", "requires_confirmation", "requires_action")


@acting_on("payment_intent")
def resolve_confirm(intent: dict[str, Any], params: Params) -> dict[str, Any]:
    if intent["status"] not in CONFIRMABLE:
        raise unexpected(f"You cannot confirm this PaymentIntent because it has a status of {intent['status']}.")
    if not (params.get("payment_method") or intent["payment_method"]):
        raise Refused(Problem("You cannot confirm this PaymentIntent because it's missing a payment method. "
                              "Update the PaymentIntent with a payment method and then confirm it again.",
                              param="payment_method", code="payment_intent_unexpected_state"))
    return so.confirmed(intent, params)


@acting_on("payment_intent")
def resolve_capture(intent: dict[str, Any], params: Params) -> dict[str, Any]:
    if intent["status"] != "requires_capture":
        raise unexpected(f"This PaymentIntent could not be captured because it has a status of {intent['status']}. "
                         "Only a PaymentIntent with one of the following statuses may be captured: requires_capture.")
    amount = so.positive_int(params.get("amount_to_capture")) or intent["amount_capturable"]
    if amount > intent["amount_capturable"]:
        raise Refused(Problem(f"The amount to capture ({amount}) is greater than the amount capturable "
                              f"({intent['amount_capturable']}).", param="amount_to_capture",
                              code="amount_too_large"))
    return so.captured(intent, amount)


@acting_on("payment_intent")
def resolve_cancel_intent(intent: dict[str, Any], params: Params) -> dict[str, Any]:
    if intent["status"] in ("succeeded", "canceled"):
        raise unexpected(f"You cannot cancel this PaymentIntent because it has a status of {intent['status']}. "
                         "Only a PaymentIntent with one of the following statuses may be canceled: "
                         "requires_payment_method, requires_capture, requires_confirmation, requires_action, "
                         "processing.")
    return so.canceled(intent, params.get("cancellation_reason"))


@acting_on("refund")
def resolve_cancel_refund(refund: dict[str, Any], params: Params) -> dict[str, Any]:
    if refund["status"] != "requires_action":
        raise Refused(Problem("Only refunds with a status of requires_action can be canceled."))
    return {**refund, "status": "canceled"}


@acting_on("customer")
def resolve_customer_update(customer: dict[str, Any], params: Params) -> dict[str, Any]:
    return so.updated_customer(customer, params)
