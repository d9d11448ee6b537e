"""The judge's price table: what a model call costs by the published prices, the witness `cost_accounted`
(harness/checkers/outcome.py) holds an agent's recorded cost to.

An agent keeps its own table (the reference agent's is `killpoint.reference_agent.pricing`), which may be
wrong: that is what `cost_accounted` checks, so this table is the checker's own and never imported from
the agent. `tests/checkers/test_pricing.py` checks that the two agree on every model the reference agent
and the model fake answer as.

1. `PRICES[model]` is (USD per million input tokens, USD per million output tokens); `priced(model)` says
   whether the table has the model. A model it has not cannot be witnessed: the checker then compares
   with the crash-free run instead.
2. Input tokens cost the input price; cache writes `CACHE_WRITE_FACTOR` times it, cache reads
   `CACHE_READ_FACTOR` times it; output tokens cost the output price.
3. `cost_usd(model, usage)` of one call is rounded to `ROUNDING` (a nano-dollar), so a run's recorded
   cost may differ from the sum of its calls by at most that much per call.
"""

from __future__ import annotations

from collections.abc import Mapping

PRICES: Mapping[str, tuple[float, float]] = {
    # model: (USD per million input tokens, USD per million output tokens)
    "claude-opus-4-6": (5.0, 25.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-haiku-4-5-20251001": (1.0, 5.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-5-20251101": (5.0, 25.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4-5-20250929": (3.0, 15.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-opus-5-5": (4.0, 20.0),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-fable-5-1": (10.0, 50.0),
    # OpenAI (standard tier; the fake records no cached tokens for OpenAI, so the cache factors never apply)
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o-mini-2024-07-18": (0.15, 0.60),
    "gpt-4o": (2.50, 10.0),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.0, 8.0),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5.1": (1.25, 10.0),
    "gpt-5.4": (2.50, 15.0),
    "gpt-5.4-mini": (0.75, 4.50),
    "gpt-5.4-nano": (0.20, 1.25),
    "gpt-5.5": (5.0, 30.0),
}
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1
ROUNDING = 1e-9
"""The rounding of one call's cost, in USD."""


def priced(model: object) -> bool:
    """True when `model` is in `PRICES` (flow step 1)."""
    return isinstance(model, str) and model in PRICES


def cost_usd(model: str, usage: object) -> float:
    """Dollars for one call of a priced `model` (flow steps 2 and 3); `usage` as the model fake records it
    (a mapping of `input_tokens`, `cache_creation_input_tokens`, `cache_read_input_tokens`, `output_tokens`),
    or an object with those attributes; a missing count is 0. KeyError for a model not in `PRICES`."""
    per_input, per_output = PRICES[model]

    def count(name: str) -> int:
        return int((usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, 0)) or 0)

    weighted_input = (count("input_tokens") + count("cache_creation_input_tokens") * CACHE_WRITE_FACTOR
                      + count("cache_read_input_tokens") * CACHE_READ_FACTOR)
    return round((weighted_input * per_input + count("output_tokens") * per_output) / 1_000_000, 9)
