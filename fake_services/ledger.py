"""The fake ledger: ``POST /v1/charges``, idempotent as payment APIs are.

Body: ``{"account": "acct_1", "amount_cents": 1250, "currency": "usd"}`` (``amount`` is accepted for
``amount_cents``; a positive integer of cents; ``currency`` three letters). With ``Idempotency-Key``,
the same key and body is answered with the original charge (header ``Idempotent-Replayed: true``), the
same key with another body is refused 422. Answer:
``{"id": "ch_...", "status": "succeeded", "account": ..., "amount_cents": ..., "currency": ...}``.
"""

from __future__ import annotations

from typing import Any

from .effects import EffectSpec, endpoint, require_object, require_str


def amount_of(payload: dict[str, Any]) -> Any:
    return payload.get("amount_cents", payload.get("amount"))


def validate_charge(payload: Any) -> str | None:
    problem = require_object(payload) or require_str(payload, "account") or require_str(payload, "currency")
    if problem is not None:
        return problem
    amount = amount_of(payload)
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        return "'amount_cents' (a positive integer) is required"
    if len(payload["currency"]) != 3 or not payload["currency"].isalpha():
        return "'currency' must be a three-letter code"
    return None


def charge_response(payload: dict[str, Any], new_id: str, context: Any = None) -> dict[str, Any]:
    return {
        "id": new_id, "status": "succeeded", "account": payload["account"],
        "amount_cents": amount_of(payload), "currency": payload["currency"].lower(),
    }


LEDGER = EffectSpec(
    service="ledger", idempotent=True, id_prefix="ch", validate=validate_charge, respond=charge_response,
)

ROUTES = {"/v1/charges": endpoint(LEDGER)}
