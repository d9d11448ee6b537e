"""Contract violation: no STEPS."""

START = "plan"
STATE_VERSION = 1


def initial_state(params: dict) -> dict:
    return {}
