"""``tests.tools.refund_agent`` with no ``MODEL_SCRIPT``: its model answers come from a cassette."""

from __future__ import annotations

from tests.tools.refund_agent import START, STATE_VERSION, STEPS, initial_state

__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
