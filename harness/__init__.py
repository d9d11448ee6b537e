"""killpoint: crash-test durable multi-step AI agents.

The public API, for scenario authors and tests (imported on first use, so `import killpoint` and the
pytest plugin stay light)::

    from killpoint import Schedule, Fault, Session, Trial, TrialSpec, Scenario, Context, Verdict

A step module takes its types from `killpoint.reference_agent` (Checkpoint, StepContext, StepResult).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Fault": "killpoint.faults.schedule",
    "Schedule": "killpoint.faults.schedule",
    "ScheduleError": "killpoint.faults.schedule",
    "FaultPlan": "killpoint.faults.plan",
    "shrink": "killpoint.faults.shrink",
    "Scenario": "killpoint.run.scenario",
    "ScenarioResult": "killpoint.run.scenario",
    "Context": "killpoint.run.scenario",
    "Session": "killpoint.run.trial",
    "Trial": "killpoint.run.trial",
    "TrialSpec": "killpoint.run.trial",
    "SessionConfig": "killpoint.run.config",
    "open_session": "killpoint.run.opening",
    "RunOptions": "killpoint.run.options",
    "History": "killpoint.run.history",
    "Environment": "killpoint.env.environment",
    "AgentSpec": "killpoint.env.stepmodule",
    "load_agent": "killpoint.env.stepmodule",
    "Evidence": "killpoint.checkers.evidence",
    "Verdict": "killpoint.checkers.verdict",
    "CHECKERS": "killpoint.checkers",
    "KillpointError": "killpoint.errors",
    "UsageError": "killpoint.errors",
    "expect": "killpoint.testing",
    "explain": "killpoint.testing",
    "TrialFailed": "killpoint.testing",
    "crash_free_points": "killpoint.run.points",
    "crash_free_run": "killpoint.run.points",
    "schedules_for": "killpoint.run.points",
}
__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'killpoint' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    return getattr(module, "load" if name == "load_agent" else name)
