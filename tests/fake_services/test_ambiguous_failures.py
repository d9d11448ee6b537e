"""The ambiguous failure at the fakes: the effect is applied and journalled, then the answer is an error (500,
or the API's overload answer), so the client cannot tell it was done; a retry with the same key is
replayed, a retry under a new key is done twice. Static faults (`error_applied_next`,
`overload_applied_next`) and hook decisions at `effect.applied` alike."""

from __future__ import annotations

import httpx2
import pytest

from killpoint.fake_services import Decision, Services
from killpoint.fake_services.faults import validate

CHARGE = {"account": "acct_1", "amount_cents": 1250, "currency": "usd"}
INTENT = {"amount": "1250", "currency": "usd"}
STRIPE_AUTH = {"Authorization": "Bearer sk_test_killpoint"}


def charge(c: httpx2.Client, svc: Services, key: str) -> httpx2.Response:
    return c.post(svc.url("ledger", "r-1") + "/v1/charges", json=CHARGE, headers={"Idempotency-Key": key})


def intent(c: httpx2.Client, svc: Services, key: str) -> httpx2.Response:
    return c.post(svc.url("stripe", "r-1") + "/v1/payment_intents", data=INTENT,
                  headers={**STRIPE_AUTH, "Idempotency-Key": key})


def outcomes(svc: Services) -> list[str]:
    return [a["outcome"] for a in svc.attempts("r-1")]


def test_static_error_after_applying_answers_500_and_keeps_the_effect(svc, client):
    svc.set_faults({"ledger": {"error_applied_next": 1}})
    assert charge(client, svc, "k").status_code == 500
    assert outcomes(svc) == ["injected-error"] and len(svc.effects("r-1")) == 1
    again = charge(client, svc, "k")  # the careful client: the same key
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == svc.effects("r-1")[0]["id"]
    assert outcomes(svc) == ["injected-error", "deduplicated"] and len(svc.effects("r-1")) == 1
    assert svc.faults() == {"ledger": {"error_applied_next": 0}}


def test_a_retry_under_a_new_key_is_done_twice(svc, client):
    svc.set_faults({"ledger": {"error_applied_next": 1}})
    assert charge(client, svc, "k").status_code == 500
    assert charge(client, svc, "k#2").status_code == 200
    assert outcomes(svc) == ["injected-error", "applied"] and len(svc.effects("r-1")) == 2


def test_error_before_applying_fires_first_and_applies_nothing(svc, client):
    svc.set_faults({"ledger": {"error_next": 1, "error_applied_next": 1}})
    assert charge(client, svc, "k").status_code == 503  # on arrival: nothing applied
    assert charge(client, svc, "k").status_code == 500  # then applied, answered as failed
    assert outcomes(svc) == ["injected-error", "injected-error"] and len(svc.effects("r-1")) == 1


def test_stripe_overload_after_applying_is_its_429_and_the_effect_stays(svc, client):
    svc.set_faults({"stripe": {"overload_applied_next": 1}})
    first = intent(client, svc, "pay-1")
    assert first.status_code == 429 and first.json()["error"]["code"] == "rate_limit"
    assert outcomes(svc) == ["injected-error"] and len(svc.effects("r-1")) == 1
    again = intent(client, svc, "pay-1")
    assert again.status_code == 200 and again.json()["id"] == svc.effects("r-1")[0]["id"]


def test_hook_overload_after_applying_is_the_apis_overload_answer(svc, client):
    svc.set_hook(lambda point, info: Decision.OVERLOAD if point == "effect.applied" else None)
    assert intent(client, svc, "pay-1").status_code == 429  # Stripe's rate limit
    assert charge(client, svc, "k").status_code == 503  # the plain services' overload
    assert outcomes(svc) == ["injected-error", "injected-error"] and len(svc.effects("r-1")) == 2


@pytest.mark.parametrize("faults", [{"model": {"error_applied_next": 1}}, {"ledger": {"overload_applied_next": 1}},
                                    {"openai": {"overload_applied_next": 1}}])
def test_after_applying_counters_belong_to_services_that_apply_effects(faults):
    with pytest.raises(ValueError, match="applies to"):
        validate(faults)
