"""Load and check a step module (the contract in README.md and contracts.md section 4).

A step module has ``START`` (first cursor), ``STEPS`` (cursor -> step callable), ``STATE_VERSION`` (int >= 1),
``initial_state(params) -> dict`` and optionally ``MIGRATIONS`` (``MIGRATIONS[v]`` turns a version-``v``
state into version ``v + 1``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .checkpoint import DONE
from .versioning import Migration

DEFAULT_STEPS = "killpoint.reference_agent.invoice_agent"


class BadStepModule(Exception):
    """The module does not follow the step-module contract."""


@dataclass(frozen=True)
class StepModule:
    name: str
    start: str
    steps: Mapping[str, Callable[..., Any]]
    state_version: int
    initial_state: Callable[[dict[str, Any]], dict[str, Any]]
    migrations: Mapping[int, Migration]

    @classmethod
    def from_module(cls, module: ModuleType) -> StepModule:
        missing = [a for a in ("START", "STEPS", "STATE_VERSION", "initial_state") if not hasattr(module, a)]
        if missing:
            raise BadStepModule(f"{module.__name__} lacks {', '.join(missing)}")
        sm = cls(name=module.__name__, start=module.START, steps=module.STEPS,
                 state_version=module.STATE_VERSION, initial_state=module.initial_state,
                 migrations=getattr(module, "MIGRATIONS", {}))
        if not isinstance(sm.state_version, int) or sm.state_version < 1:
            raise BadStepModule(f"{sm.name}.STATE_VERSION must be an int >= 1")
        if sm.start not in sm.steps or DONE in sm.steps:
            raise BadStepModule(f"{sm.name}: START must name a step, and {DONE!r} must not be one")
        return sm


def load_step_module(path: str = DEFAULT_STEPS) -> StepModule:
    """Import ``path`` (a dotted module name) and check it against the contract."""
    try:
        module = importlib.import_module(path)
    except ImportError as exc:
        raise BadStepModule(f"cannot import step module {path!r}: {exc}") from exc
    return StepModule.from_module(module)
