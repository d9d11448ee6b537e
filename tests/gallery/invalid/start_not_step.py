"""Contract violation: START names no step."""

START = "begin"
STATE_VERSION = 1


def plan(cp: object, ctx: object) -> object:
    raise NotImplementedError


STEPS = {"plan": plan}


def initial_state(params: dict) -> dict:
    return {}
