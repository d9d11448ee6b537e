"""Loading a step module (`--steps pkg.module`) and checking it against the contract in DESIGN.md."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from killpoint.errors import UsageError

DEFAULT_STEPS = "killpoint.reference_agent.invoice_agent"
TERMINAL = "done"


@dataclass(frozen=True)
class AgentSpec:
    """A loaded, checked step module. `digest` is SHA-256 of its source (recorded with every run)."""

    module: str
    start: str
    steps: tuple[str, ...]
    state_version: int
    digest: str
    own_effects_sql: str | None


def _bad(module: str, what: str, fix: str) -> UsageError:
    return UsageError("bad-steps-module", f"step module {module!r} {what}", fix)


def load(module: str) -> AgentSpec:
    """Import `module` and check the contract; every violation is one UsageError naming it and the fix."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not _is_prefix(exc.name, module):
            # the step module exists, but something it imports does not
            raise UsageError("bad-steps-module", f"step module {module!r} imports {exc.name!r}, which is not installed",
                             f"install {exc.name.split('.')[0]} in this environment, or run `python -c "
                             f"'import {module}'` to see the full error") from None
        raise UsageError("bad-steps-module", f"cannot import step module {module!r}: {exc}",
                         "give a dotted module path importable from here (run from the project root or "
                         "pip install your package), e.g. --steps killpoint.reference_agent.invoice_agent") from None
    except Exception as exc:  # a user's module may fail to import in any way
        raise UsageError("bad-steps-module", f"importing step module {module!r} raised {type(exc).__name__}: {exc}",
                         f"run `python -c 'import {module}'` to see the full error") from None
    return check(mod, module)


def _is_prefix(name: str, module: str) -> bool:
    """True when `name` is `module` or one of its parent packages (the step module itself is missing)."""
    return module == name or module.startswith(name + ".")


def check(mod: ModuleType, module: str) -> AgentSpec:
    steps = getattr(mod, "STEPS", None)
    if not isinstance(steps, dict) or not steps:
        raise _bad(module, "has no STEPS", "define STEPS = {cursor: step_callable, ...} (a non-empty dict)")
    start = getattr(mod, "START", None)
    if not isinstance(start, str) or start not in steps:
        raise _bad(module, f"has START = {start!r}, which is not a step",
                   f"set START to one of the STEPS keys: {', '.join(map(str, steps))}")
    if TERMINAL in steps:
        raise _bad(module, f"has a step named {TERMINAL!r}, the terminal cursor",
                   f"rename that step; a step returns {TERMINAL!r} as its next cursor to finish the run")
    for name, fn in steps.items():
        if not callable(fn):
            raise _bad(module, f"has step {name!r} that is not callable",
                       "make each STEPS value a function (checkpoint, context) -> StepResult")
    version = getattr(mod, "STATE_VERSION", None)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        what = "has no STATE_VERSION" if version is None else f"has STATE_VERSION = {version!r}, not an int >= 1"
        raise _bad(module, what, "define STATE_VERSION = 1 (an int, raised with each state change)")
    if not callable(getattr(mod, "initial_state", None)):
        raise _bad(module, "has no initial_state", "define initial_state(params: dict) -> dict")
    migrations = getattr(mod, "MIGRATIONS", {})
    if not isinstance(migrations, dict) or not all(isinstance(k, int) and callable(v) for k, v in migrations.items()):
        raise _bad(module, "has MIGRATIONS that is not {version: callable}",
                   "define MIGRATIONS = {1: migrate_v1_to_v2, ...} or leave it out")
    try:
        source = inspect.getsource(mod).encode()
    except (OSError, TypeError):
        source = module.encode()
    return AgentSpec(module=module, start=start, steps=tuple(steps), state_version=version,
                     digest=hashlib.sha256(source).hexdigest()[:16],
                     own_effects_sql=getattr(mod, "OWN_EFFECTS_SQL", None))
