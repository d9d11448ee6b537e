"""Contract violation: no STATE_VERSION."""

START = "plan"


def plan(cp: object, ctx: object) -> object:
    raise NotImplementedError


STEPS = {"plan": plan}


def initial_state(params: dict) -> dict:
    return {}
