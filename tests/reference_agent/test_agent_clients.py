"""The service and model clients against the real fakes: retries keep the key; ambiguity is never retried
without one."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx2
import pytest

from killpoint.fake_services import Services
from killpoint.reference_agent.clients import (
    PRICES,
    EffectFailed,
    Ledger,
    Mailer,
    ModelClient,
    RetryPolicy,
    ServiceUnavailable,
    Webhook,
    cost_usd,
)

RETRY = RetryPolicy(attempts=4, backoff_seconds=0.001)


@pytest.fixture
def svc() -> Iterator[Services]:
    with Services.start() as services:
        yield services


@pytest.fixture
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=10) as client:
        yield client


class Responses:
    """Counts ``effect.responded`` reports."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def outcomes(svc: Services, service: str) -> list[str]:
    return [a["outcome"] for a in svc.attempts("r") if a["service"] == service]


def test_5xx_is_retried_with_the_same_key(svc: Services, http: httpx2.Client) -> None:
    svc.set_faults({"ledger": {"error_next": 2}})
    responded = Responses()
    receipt = Ledger(http, svc.url("ledger", "r"), responded, RETRY).charge("acct", 100, "usd", key="r:charge")
    assert receipt["status"] == "succeeded" and responded.count == 1
    assert outcomes(svc, "ledger") == ["injected-error", "injected-error", "applied"]
    assert {a["key"] for a in svc.attempts("r")} == {"r:charge"}


def test_a_dropped_answer_is_retried_and_deduplicated(svc: Services, http: httpx2.Client) -> None:
    svc.set_faults({"mailer": {"drop_next": 1}})
    responded = Responses()
    Mailer(http, svc.url("mailer", "r"), responded, RETRY).send("a@example.com", "invoice", {}, key="r:email")
    assert outcomes(svc, "mailer") == ["dropped", "deduplicated"]
    assert len(svc.effects("r")) == 1 and responded.count == 1


def test_retries_running_out_is_transient_not_a_failure(svc: Services, http: httpx2.Client) -> None:
    svc.set_faults({"ledger": {"error_next": 10}})
    responded = Responses()
    with pytest.raises(ServiceUnavailable):
        Ledger(http, svc.url("ledger", "r"), responded, RETRY).charge("acct", 100, "usd", key="k")
    assert len(outcomes(svc, "ledger")) == RETRY.attempts and responded.count == 0


def test_same_key_other_payload_is_a_final_failure(svc: Services, http: httpx2.Client) -> None:
    ledger = Ledger(http, svc.url("ledger", "r"), Responses(), RETRY)
    ledger.charge("acct", 100, "usd", key="k")
    with pytest.raises(EffectFailed) as failed:
        ledger.charge("acct", 999, "usd", key="k")
    assert failed.value.status == 422 and not isinstance(failed.value, ServiceUnavailable)


def test_webhook_without_keys_never_retries_an_ambiguous_failure(svc: Services, http: httpx2.Client) -> None:
    webhook = Webhook(http, svc.url("webhook", "r"), Responses(), RETRY)
    svc.set_faults({"webhook": {"error_next": 1}})
    with pytest.raises(ServiceUnavailable):
        webhook.post("e", {})
    svc.set_faults({"webhook": {"drop_next": 1}})
    with pytest.raises(httpx2.TransportError):
        webhook.post("e", {})
    assert outcomes(svc, "webhook") == ["injected-error", "dropped"]
    assert len(svc.effects("r")) == 1  # the dropped one was applied; it was not repeated


def test_model_client_survives_overload_and_prices_the_usage(svc: Services) -> None:
    svc.set_faults({"model": {"overload_next": 2}})
    sdk = anthropic.Anthropic(base_url=svc.url("model", "r"), api_key="k", max_retries=3)
    try:
        reply = ModelClient(sdk, "claude-haiku-4-5").ask([{"role": "user", "content": "hello"}])
    finally:
        sdk.close()
    [*_, answered] = svc.model_requests("r")
    assert reply.text == answered["response_text"]
    assert reply.message == {"role": "assistant", "content": reply.text}
    price_in, price_out = PRICES["claude-haiku-4-5"]
    usage = answered["usage"]
    expected = (usage["input_tokens"] * price_in + usage["output_tokens"] * price_out) / 1e6
    assert reply.cost_usd == pytest.approx(expected)


def test_cost_counts_cache_tokens_and_prices_unknown_models_as_the_default() -> None:
    class Usage:
        input_tokens, output_tokens = 1_000_000, 1_000_000
        cache_creation_input_tokens, cache_read_input_tokens = 1_000_000, 1_000_000

    price_in, price_out = PRICES["claude-sonnet-4-6"]
    assert cost_usd("some-future-model", Usage()) == pytest.approx(price_in * (1 + 1.25 + 0.1) + price_out)
