"""Mutant: the model's cost is mispriced in every run. Each call's input tokens are billed at the output price
and its output tokens at the input price (the two columns of the price table swapped), so every run, the
crash-free one too, records a wrong cost: a comparison with the agent's own crash-free run cannot see it,
only the usage the model fake saw, priced by the table, can."""

from __future__ import annotations

from typing import Any

from killpoint.reference_agent import clients
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _swapped(model: str, usage: Any) -> float:
    price_in, price_out = clients.PRICES.get(model, clients.PRICES[clients.DEFAULT_MODEL])
    tokens_in = getattr(usage, "input_tokens", 0) or 0
    tokens_out = getattr(usage, "output_tokens", 0) or 0
    return round((tokens_in * price_out + tokens_out * price_in) / 1_000_000, 9)  # BUG: the columns swapped


clients.cost_usd = _swapped
