"""A valid step module that imports nothing heavy, for CLI tests that stop before anything runs (a bad
schedule is refused before the environment starts)."""

from __future__ import annotations

START = "plan"
STATE_VERSION = 1


def _never(cp: object, ctx: object) -> object:
    raise AssertionError("tiny_agent's steps are never run")


STEPS = {"plan": _never, "email": _never}


def initial_state(params: dict) -> dict:
    return {}
