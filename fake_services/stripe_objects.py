"""The fake Stripe's objects: how each is built from a request's parameters, with every field the API returns.

Pure: builders take parameters (as the SDK sends them: strings) and ids, and return the object as JSON.
Field sets are those of the ``stripe`` SDK's typed resources (``stripe.PaymentIntent`` ...); the fields
this fake has nothing to say about are ``null`` (tests/fake_services/test_conformance_stripe.py checks them
against the installed SDK's annotations).

Objects are deterministic: ``created`` is a fixed time, ``livemode`` false, ids come from the caller.
A PaymentIntent's charge is not an effect of its own: it is derived from the intent (:func:`charge_of`),
and its id is the intent's with ``ch_`` before it (``ch_pi_...``), so a refund naming it compares across
runs as the intent's id does.
"""

from __future__ import annotations

from typing import Any

from .canon import digest

CREATED = 1735689600
"""``created`` of every object: 2025-01-01T00:00:00Z (a fixed time keeps replays and baselines equal)."""


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


def metadata(params: dict[str, Any]) -> dict[str, Any]:
    value = params.get("metadata")
    return value if isinstance(value, dict) else {}


def merged_metadata(old: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Stripe's metadata update: keys are merged; a key set to ``""`` is removed; ``metadata=""`` clears all."""
    if params.get("metadata") == "":
        return {}
    out = {**old, **metadata(params)}
    return {k: v for k, v in out.items() if v != ""}


def nulls(*names: str) -> dict[str, None]:
    return dict.fromkeys(names)


# payment intents --------------------------------------------------------------------------------


def payment_intent(params: dict[str, Any], new_id: str) -> dict[str, Any]:
    """A new PaymentIntent; ``confirm=true`` confirms it at once (:func:`confirmed`)."""
    intent = {
        **nulls("application", "application_fee_amount", "automatic_payment_methods", "canceled_at",
                "cancellation_reason", "last_payment_error", "next_action", "on_behalf_of",
                "payment_method_configuration_details", "processing", "review", "setup_future_usage", "shipping",
                "source", "statement_descriptor", "statement_descriptor_suffix", "transfer_data", "transfer_group"),
        "id": new_id, "object": "payment_intent", "amount": positive_int(params["amount"]), "amount_capturable": 0,
        "amount_received": 0, "capture_method": "manual" if params.get("capture_method") == "manual" else "automatic",
        "client_secret": f"{new_id}_secret_{digest(new_id, 24)}", "confirmation_method": "automatic",
        "created": CREATED, "currency": params["currency"].lower(), "customer": params.get("customer"),
        "description": params.get("description"), "latest_charge": None, "livemode": False,
        "metadata": metadata(params), "payment_method": params.get("payment_method"), "payment_method_options": {},
        "payment_method_types": params.get("payment_method_types") or ["card"],
        "receipt_email": params.get("receipt_email"),
        "status": "requires_confirmation" if params.get("payment_method") else "requires_payment_method",
    }
    return confirmed(intent, {}) if truthy(params.get("confirm")) else intent


def confirmed(intent: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The intent after a successful confirmation: charged (``succeeded``), or authorised only
    (``requires_capture``) when its capture method is manual; ``latest_charge`` names its charge."""
    out = {**intent, "payment_method": params.get("payment_method") or intent["payment_method"],
           "latest_charge": f"ch_{intent['id']}"}
    if params.get("receipt_email"):
        out["receipt_email"] = params["receipt_email"]
    if out["capture_method"] == "manual":
        return {**out, "status": "requires_capture", "amount_capturable": out["amount"]}
    return {**out, "status": "succeeded", "amount_received": out["amount"]}


def captured(intent: dict[str, Any], amount: int) -> dict[str, Any]:
    """The intent after capturing ``amount`` (at most what was authorised; the rest is released)."""
    return {**intent, "status": "succeeded", "amount_received": amount, "amount_capturable": 0}


def canceled(intent: dict[str, Any], reason: str | None) -> dict[str, Any]:
    return {**intent, "status": "canceled", "canceled_at": CREATED, "cancellation_reason": reason,
            "amount_capturable": 0}


# charges ----------------------------------------------------------------------------------------


def charge(params: dict[str, Any], new_id: str) -> dict[str, Any]:
    """A charge made with ``POST /v1/charges`` (captured unless ``capture=false``)."""
    amount = positive_int(params["amount"]) or 0
    take = params.get("capture") != "false" and params.get("capture") is not False
    return _charge(new_id, amount, amount if take else 0, params["currency"].lower(), params.get("customer"),
                   params.get("description"), metadata(params), None, params.get("source"), params.get("source"))


def charge_of(intent: dict[str, Any]) -> dict[str, Any]:
    """The charge a confirmed PaymentIntent made (``intent["latest_charge"]``), as it stands now."""
    taken = intent["amount_received"] if intent["status"] == "succeeded" else 0
    return _charge(intent["latest_charge"], intent["amount"], taken, intent["currency"], intent["customer"],
                   intent["description"], dict(intent["metadata"]), intent["id"], intent["payment_method"], None)


def _charge(charge_id: str, amount: int, amount_captured: int, currency: str, customer: Any, description: Any,
            meta: dict[str, Any], intent_id: str | None, payment_method: Any, source: Any) -> dict[str, Any]:
    return {
        **nulls("application", "application_fee", "application_fee_amount", "balance_transaction",
                "calculated_statement_descriptor", "failure_balance_transaction", "failure_code", "failure_message",
                "on_behalf_of", "receipt_email", "receipt_number", "receipt_url", "review", "shipping",
                "source_transfer", "statement_descriptor", "statement_descriptor_suffix", "transfer_data",
                "transfer_group"),
        "id": charge_id, "object": "charge", "amount": amount, "amount_captured": amount_captured,
        "amount_refunded": 0, "billing_details": {"address": None, "email": None, "name": None, "phone": None},
        "captured": amount_captured > 0, "created": CREATED, "currency": currency, "customer": customer,
        "description": description, "disputed": False, "fraud_details": {}, "livemode": False, "metadata": meta,
        "outcome": {"network_status": "approved_by_network", "reason": None, "risk_level": "normal",
                    "seller_message": "Payment complete.", "type": "authorized"},
        "paid": True, "payment_intent": intent_id, "payment_method": payment_method,
        "payment_method_details": {"type": "card"}, "refunded": False,
        "source": {"id": source, "object": "card"} if isinstance(source, str) else None, "status": "succeeded",
    }


def with_refunds(charge: dict[str, Any], refunded: int) -> dict[str, Any]:
    """The charge showing ``refunded`` cents refunded (a partial capture's released rest counts too)."""
    released = charge["amount"] - charge["amount_captured"] if charge["captured"] else 0
    total = refunded + released
    return {**charge, "amount_refunded": total, "refunded": total >= charge["amount"]}


# refunds ----------------------------------------------------------------------------------------


def refund(params: dict[str, Any], new_id: str, charge: dict[str, Any], amount: int, status: str) -> dict[str, Any]:
    """A refund of ``amount`` of ``charge``."""
    return {
        **nulls("balance_transaction", "destination_details", "receipt_number", "source_transfer_reversal",
                "transfer_reversal"),
        "id": new_id, "object": "refund", "amount": amount, "charge": charge["id"], "created": CREATED,
        "currency": charge["currency"], "metadata": metadata(params), "payment_intent": charge["payment_intent"],
        "reason": params.get("reason"), "status": status,
    }


# customers --------------------------------------------------------------------------------------

CUSTOMER_FIELDS = ("email", "name", "description", "phone")
"""The customer fields ``POST /v1/customers`` and its update set as given."""


def customer(params: dict[str, Any], new_id: str) -> dict[str, Any]:
    return {
        **nulls("address", "currency", "default_source", "discount", "shipping", "test_clock"),
        "id": new_id, "object": "customer", "balance": 0, "created": CREATED, "delinquent": False,
        "invoice_prefix": digest(new_id, 8).upper(), "livemode": False, "metadata": metadata(params),
        "invoice_settings": nulls("custom_fields", "default_payment_method", "footer", "rendering_options"),
        "next_invoice_sequence": 1, "preferred_locales": [], "tax_exempt": "none",
        **{name: params.get(name) or None for name in CUSTOMER_FIELDS},
    }


def updated_customer(old: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The customer after ``POST /v1/customers/{id}``: the fields given replace theirs (``""`` unsets)."""
    out = {**old, "metadata": merged_metadata(old["metadata"], params)}
    for name in CUSTOMER_FIELDS:
        if name in params:
            out[name] = params[name] or None
    return out
