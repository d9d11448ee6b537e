"""Contract violation: a STEPS value is not callable."""

START = "plan"
STATE_VERSION = 1
STEPS = {"plan": "plan_the_invoice"}


def initial_state(params: dict) -> dict:
    return {}
