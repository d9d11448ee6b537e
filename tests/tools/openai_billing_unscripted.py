"""The OpenAI Agents SDK example (``examples/tool_agents/openai_agents_billing.py``, on the path) with no
``MODEL_SCRIPT``: its model answers come from a cassette, or from the upstream it records."""

from __future__ import annotations

from openai_agents_billing import START, STATE_VERSION, STEPS, initial_state

__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
