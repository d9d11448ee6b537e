"""Hostile: a step name with a space in it, which would break schedules and replay lines."""

from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

STEPS = {**STEPS, 'send email': STEPS["email"]}
