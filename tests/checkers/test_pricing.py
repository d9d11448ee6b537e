"""The judge's price table (`killpoint.checkers.pricing`) and the reference agent's own
(`killpoint.reference_agent.pricing`) are two tables on purpose, and agree on every model the reference
agent asks for and the model fake answers as: the reference agent's correct accounting passes
`cost_accounted`, and only a wrong table (the `misprices` mutant) fails it."""

from __future__ import annotations

import pytest

from killpoint.checkers import pricing as judge
from killpoint.fake_services.model import answer, message_body
from killpoint.reference_agent import pricing as agent

MODELS = sorted({*agent.PRICES, agent.DEFAULT_MODEL})
"""Every model the reference agent asks for: its table, and the model it uses unless told otherwise."""

USAGES = [
    {"input_tokens": 0, "output_tokens": 0},
    {"input_tokens": 64, "output_tokens": 9},
    {"input_tokens": 1234, "cache_creation_input_tokens": 777, "cache_read_input_tokens": 4321, "output_tokens": 99},
    {"input_tokens": 1_000_003, "output_tokens": 250_001, "cache_read_input_tokens": None},
]


@pytest.mark.parametrize("model", MODELS)
def test_both_tables_price_the_fakes_answers_alike(model: str) -> None:
    fake = answer(model, None, [{"role": "user", "content": "hello"}], 512)
    assert message_body(model, fake)["model"] == model  # the fake answers as the model asked for
    assert judge.priced(model) and agent.priced(model)
    assert judge.PRICES[model] == agent.PRICES[model]
    for usage in [fake.usage, *USAGES]:
        assert judge.cost_usd(model, usage) == agent.cost_usd(model, usage), usage


def test_the_tables_agree_on_models_and_factors() -> None:
    assert dict(judge.PRICES) == agent.PRICES
    assert (judge.CACHE_WRITE_FACTOR, judge.CACHE_READ_FACTOR, judge.ROUNDING) == (
        agent.CACHE_WRITE_FACTOR, agent.CACHE_READ_FACTOR, agent.ROUNDING)


def test_the_judge_never_guesses_a_models_price() -> None:
    """The agent prices an unknown model as its default; the judge has no witness for it (the checker then
    compares with the crash-free run)."""
    assert not judge.priced("claude-unknown-9") and not judge.priced(None)
    with pytest.raises(KeyError):
        judge.cost_usd("claude-unknown-9", {"input_tokens": 1})
