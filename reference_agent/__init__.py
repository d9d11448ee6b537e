"""killpoint.reference_agent: a small durable-agent runtime on Postgres and the reference invoice agent built on it.

It imports nothing else of killpoint. A step module imports its types from here, the one documented place::

    from killpoint.reference_agent import Checkpoint, StepContext, StepResult

See README.md in this folder for the step-module contract, and ``python -m killpoint.reference_agent.worker``
for the worker process. The names below are imported on first use, so importing this package is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Checkpoint": ".runtime",
    "StepContext": ".runtime",
    "StepResult": ".runtime",
    "StepModule": ".step_module",
    "BadStepModule": ".step_module",
    "load_step_module": ".step_module",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
