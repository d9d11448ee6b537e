"""The reference agent's own price table, and the cost of one call: what it bills each model call with and
records as ``cost_usd`` (its own accounting, as any real agent keeps its own).

The harness judges recorded costs by its own table (``killpoint.checkers.pricing``, used by
``cost_accounted``), never by this one: an agent's table may be wrong, which is what that checker finds.
``tests/checkers/test_pricing.py`` checks that the two agree on every model this agent and the model fake
answer as. Imports nothing (no SDK).

1. ``PRICES[model]`` is (USD per million input tokens, USD per million output tokens); a model not in the
   table is priced as :data:`DEFAULT_MODEL` by :func:`cost_usd`, and :func:`priced` says whether it is in it.
2. Cache writes cost :data:`CACHE_WRITE_FACTOR` times the input price, cache reads :data:`CACHE_READ_FACTOR`
   times it.
3. :func:`cost_usd` of one call is rounded to 9 decimals (a nano-dollar), so a run's recorded cost may differ
   from the sum of its calls by at most one nano-dollar per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PRICES: dict[str, tuple[float, float]] = {
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
DEFAULT_MODEL = "claude-sonnet-4-6"  # not on the SDK's deprecated list, so no warning on every call
CACHE_WRITE_FACTOR, CACHE_READ_FACTOR = 1.25, 0.1
ROUNDING = 1e-9
"""The rounding of one call's cost, in USD."""


def priced(model: str | None) -> bool:
    """True when ``model`` is in :data:`PRICES`."""
    return model in PRICES


def _tokens(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, 0)
    return int(value or 0)


def cost_usd(model: str, usage: Any) -> float:
    """Dollars for one call: input, cache writes (x1.25), cache reads (x0.1) and output tokens. ``usage`` is
    the SDK's usage object or the same fields as a mapping (what the model fake records).

    Unknown models are priced as :data:`DEFAULT_MODEL`.
    """
    price_in, price_out = PRICES.get(model, PRICES[DEFAULT_MODEL])
    tokens_in = _tokens(usage, "input_tokens")
    cache_write = _tokens(usage, "cache_creation_input_tokens")
    cache_read = _tokens(usage, "cache_read_input_tokens")
    tokens_out = _tokens(usage, "output_tokens")
    dollars = (tokens_in + cache_write * CACHE_WRITE_FACTOR + cache_read * CACHE_READ_FACTOR) * price_in
    return round((dollars + tokens_out * price_out) / 1_000_000, 9)
