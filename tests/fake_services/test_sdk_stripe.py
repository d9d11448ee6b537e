"""The real stripe SDK against the fake Stripe: idempotency as Stripe documents it, errors as the SDK's own
types, faults at the kill points, per-run keys, retrieval."""

from __future__ import annotations

import time
from typing import Any

import pytest

from killpoint.fake_services import Decision, Services
from killpoint.fake_services.stripe_api import decode_form

stripe = pytest.importorskip("stripe")

INTENT = {"amount": 1250, "currency": "usd", "payment_method": "pm_card_visa", "confirm": True,
          "metadata": {"invoice": "inv-1"}}


def client(svc: Services, run: str = "r-1", retries: int = 0) -> Any:
    return stripe.StripeClient("sk_test_killpoint", base_addresses={"api": svc.url("stripe", run)},
                               max_network_retries=retries)


def create_intent(c: Any, key: str | None = "pay-inv-1", **params: Any) -> Any:
    options = {"idempotency_key": key} if key else {}
    return c.v1.payment_intents.create(params={**INTENT, **params}, options=options)


def outcomes(svc: Services, run: str = "r-1") -> list[str]:
    return [a["outcome"] for a in svc.attempts(run)]


def test_create_and_retrieve_a_payment_intent(svc):
    c = client(svc)
    intent = create_intent(c)
    assert intent.object == "payment_intent" and intent.id.startswith("pi_")
    assert (intent.amount, intent.currency, intent.status) == (1250, "usd", "succeeded")
    assert intent.amount_received == 1250 and intent.metadata["invoice"] == "inv-1" and intent.livemode is False
    assert intent.last_response.request_id.startswith("req_")
    again = c.v1.payment_intents.retrieve(intent.id)
    assert again.to_dict() == intent.to_dict()
    pending = create_intent(c, key="k2", confirm=False)
    assert pending.status == "requires_confirmation"
    [effect, _] = svc.effects("r-1")
    assert effect["service"] == "stripe" and effect["key"] == "pay-inv-1" and effect["id"] == intent.id
    assert effect["payload"]["amount"] == "1250" and effect["payload"]["metadata"] == {"invoice": "inv-1"}
    assert [a["path"] for a in svc.attempts("r-1")] == ["/v1/payment_intents"] * 2  # a retrieve is no attempt


def test_same_key_same_params_replays_the_first_response(svc):
    c = client(svc)
    first = create_intent(c)
    second = create_intent(c)
    assert second.to_dict() == first.to_dict()
    assert second.last_response.headers["Idempotent-Replayed"] == "true"
    assert second.last_response.headers["Original-Request"] == first.last_response.request_id
    assert outcomes(svc) == ["applied", "deduplicated"] and len(svc.effects("r-1")) == 1


def test_same_key_other_params_or_endpoint_raises_idempotency_error(svc):
    c = client(svc)
    create_intent(c)
    with pytest.raises(stripe.IdempotencyError) as caught:
        create_intent(c, amount=9999)
    assert caught.value.http_status == 400 and "same parameters" in caught.value.user_message
    with pytest.raises(stripe.IdempotencyError):
        c.v1.charges.create(params={"amount": 1250, "currency": "usd", "source": "tok_visa"},
                            options={"idempotency_key": "pay-inv-1"})
    assert outcomes(svc) == ["applied", "rejected", "rejected"] and len(svc.effects("r-1")) == 1


def test_keys_are_scoped_per_run(svc):
    one, two = create_intent(client(svc, "r-1")), create_intent(client(svc, "r-2"))
    assert one.id != two.id
    assert len(svc.effects("r-1")) == len(svc.effects("r-2")) == 1


def test_injected_error_raises_the_sdks_api_error_and_applies_nothing(svc):
    svc.set_faults({"stripe": {"error_next": 1}})
    with pytest.raises(stripe.APIError) as caught:
        create_intent(client(svc))
    assert caught.value.http_status == 503
    assert outcomes(svc) == ["injected-error"] and svc.effects("r-1") == []


def test_error_after_applying_leaves_the_effect_and_a_retry_gets_it(svc):
    svc.set_hook(lambda point, info: Decision.ERROR if point == "effect.applied" else None)
    with pytest.raises(stripe.APIError) as caught:
        create_intent(client(svc))
    assert caught.value.http_status == 500
    svc.set_hook(None)
    again = create_intent(client(svc))
    assert [e["id"] for e in svc.effects("r-1")] == [again.id]
    assert outcomes(svc) == ["injected-error", "deduplicated"]


def test_sdk_retries_an_error_with_its_own_key(svc):
    svc.set_faults({"stripe": {"error_next": 1}})
    intent = client(svc, retries=1).v1.charges.create(params={"amount": 300, "currency": "usd", "source": "tok_visa"})
    assert intent.status == "succeeded"
    first, second = svc.attempts("r-1")
    assert first["key"] == second["key"] and first["key"]  # the SDK's generated key, the same on its retry
    assert outcomes(svc) == ["injected-error", "applied"] and len(svc.effects("r-1")) == 1


def test_drop_after_apply_applies_once_and_the_client_sees_a_connection_error(svc):
    svc.set_faults({"stripe": {"drop_next": 1}})
    with pytest.raises(stripe.APIConnectionError):
        create_intent(client(svc))
    assert outcomes(svc) == ["dropped"] and len(svc.effects("r-1")) == 1
    again = create_intent(client(svc))  # the caller retries with its key: the same object, nothing new
    assert again.id == svc.effects("r-1")[0]["id"]
    assert outcomes(svc) == ["dropped", "deduplicated"] and len(svc.effects("r-1")) == 1


def test_drop_after_apply_healed_by_the_sdks_own_retry(svc):
    svc.set_faults({"stripe": {"drop_next": 1}})
    intent = create_intent(client(svc, retries=1), key=None)  # the SDK's own key, reused on its retry
    assert outcomes(svc) == ["dropped", "deduplicated"]
    assert [e["id"] for e in svc.effects("r-1")] == [intent.id]


def test_overload_raises_rate_limit_error(svc):
    svc.set_faults({"stripe": {"overload_next": 1}})
    with pytest.raises(stripe.RateLimitError) as caught:
        create_intent(client(svc))
    assert caught.value.http_status == 429 and caught.value.error.code == "rate_limit"
    assert svc.effects("r-1") == []


def test_hook_holds_stripe_requests_at_the_effect_points(svc):
    seen: list[tuple[str, str, str | None]] = []

    def hook(point: str, info: dict[str, Any]) -> Decision:
        seen.append((point, info["service"], info["key"]))
        return Decision.slow(150) if point == "effect.received" else Decision.GO

    svc.set_hook(hook)
    started = time.perf_counter()
    create_intent(client(svc))
    assert time.perf_counter() - started >= 0.15
    assert seen == [("effect.received", "stripe", "pay-inv-1"), ("effect.applied", "stripe", "pay-inv-1")]


def test_validation_errors_are_invalid_request_errors(svc):
    c = client(svc)
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.payment_intents.create(params={"currency": "usd"})
    assert (caught.value.param, caught.value.code, caught.value.http_status) == ("amount", "parameter_missing", 400)
    with pytest.raises(stripe.InvalidRequestError):
        c.v1.charges.create(params={"amount": 5, "currency": "usd"})  # neither source nor customer
    with pytest.raises(stripe.InvalidRequestError):
        create_intent(c, payment_method="")  # confirm without a payment method
    assert outcomes(svc) == ["rejected"] * 3 and svc.effects("r-1") == []


def test_refunds_of_charges_and_payment_intents(svc):
    c = client(svc)
    charge = c.v1.charges.create(params={"amount": 1000, "currency": "eur", "source": "tok_visa"},
                                 options={"idempotency_key": "charge-1"})
    part = c.v1.refunds.create(params={"charge": charge.id, "amount": 400}, options={"idempotency_key": "refund-1"})
    assert (part.object, part.amount, part.currency, part.charge, part.status) == ("refund", 400, "eur", charge.id,
                                                                                  "succeeded")
    assert c.v1.refunds.retrieve(part.id).amount == 400
    seen = c.v1.charges.retrieve(charge.id)
    assert (seen.amount_refunded, seen.refunded) == (400, False)
    whole = c.v1.refunds.create(params={"payment_intent": create_intent(c).id})
    assert whole.amount == 1250 and whole.payment_intent
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.refunds.create(params={"charge": "ch_unknown"})
    assert caught.value.code == "resource_missing" and caught.value.param == "charge"
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.refunds.create(params={"charge": charge.id, "amount": 5000})
    assert caught.value.code == "amount_too_large"
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.charges.retrieve("ch_unknown")
    assert caught.value.http_status == 404 and caught.value.code == "resource_missing"
    assert [e["response"]["object"] for e in svc.effects("r-1")] == ["charge", "refund", "payment_intent", "refund"]


def test_module_global_api_base_works_too(svc, monkeypatch):
    monkeypatch.setattr(stripe, "api_key", "sk_test_killpoint")
    monkeypatch.setattr(stripe, "api_base", svc.url("stripe", "r-g"))
    monkeypatch.setattr(stripe, "max_network_retries", 0)
    charge = stripe.Charge.create(amount=700, currency="usd", source="tok_visa", idempotency_key="g-1")
    assert stripe.Charge.retrieve(charge.id).amount == 700
    assert [e["key"] for e in svc.effects("r-g")] == ["g-1"]


def test_form_decoding():
    assert decode_form("amount=5&metadata[a]=1&metadata[b]=&expand[0]=x&expand[1]=y&items[0][price]=p") == {
        "amount": "5", "metadata": {"a": "1", "b": ""}, "expand": ["x", "y"], "items": [{"price": "p"}]}
    assert decode_form("tags[]=a&tags[]=b") == {"tags": ["a", "b"]}
