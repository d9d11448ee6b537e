"""The one loader of step modules: import one and check it against the contract (contracts.md section 4).

A step module has ``START`` (first cursor), ``STEPS`` (cursor -> step callable), ``STATE_VERSION`` (int >= 1),
``initial_state(params) -> dict`` and optionally ``MIGRATIONS`` (``MIGRATIONS[v]`` turns a version-``v``
state into version ``v + 1``), ``OWN_EFFECTS_SQL``, and its own schema: ``SCHEMA_SQL`` (idempotent DDL) and/or
``setup(conn)``, run once per database before any run, and ``NONDETERMINISTIC`` (field paths such as
``state.decided_at`` or ``effect.mailer.sent_at`` that differ between two runs by design), and
``PREVIOUS_STEPS`` (the dotted name of the step module's previous version, importable beside it: what
schema-upgrade resumes after when ``--previous-steps`` is not given). The worker runtime loads its agent with
``load_step_module``; the harness loads the same way (``killpoint.env.stepmodule.load``) and turns a
``BadStepModule`` into its one-line usage error. Every violation names the module, what is wrong and the fix.
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
    """The module cannot be imported or does not follow the step-module contract."""

    def __init__(self, module: str, what: str, fix: str) -> None:
        super().__init__(f"step module {module!r} {what}")
        self.module, self.what, self.fix = module, what, fix

    @property
    def message(self) -> str:
        return str(self)


@dataclass(frozen=True)
class StepModule:
    name: str
    start: str
    steps: Mapping[str, Callable[..., Any]]
    state_version: int
    initial_state: Callable[[dict[str, Any]], dict[str, Any]]
    migrations: Mapping[int, Migration]
    own_effects_sql: str | None = None
    schema_sql: str | None = None
    setup: Callable[[Any], None] | None = None
    nondeterministic: tuple[str, ...] = ()
    previous_steps: str | None = None
    module: ModuleType | None = None

    @classmethod
    def from_module(cls, module: ModuleType, name: str | None = None) -> StepModule:
        """Check `module` against the contract; BadStepModule names the first violation and its fix."""
        name = name or module.__name__
        steps = getattr(module, "STEPS", None)
        if not isinstance(steps, dict) or not steps:
            raise BadStepModule(name, "has no STEPS", "define STEPS = {cursor: step_callable, ...} (a non-empty dict)")
        start = getattr(module, "START", None)
        if not isinstance(start, str) or start not in steps:
            raise BadStepModule(name, f"has START = {start!r}, which is not a step",
                                f"set START to one of the STEPS keys: {', '.join(map(str, steps))}")
        if DONE in steps:
            raise BadStepModule(name, f"has a step named {DONE!r}, the terminal cursor",
                                f"rename that step; a step returns {DONE!r} as its next cursor to finish the run")
        for step, fn in steps.items():
            if not callable(fn):
                raise BadStepModule(name, f"has step {step!r} that is not callable",
                                    "make each STEPS value a function (checkpoint, context) -> StepResult")
        version = getattr(module, "STATE_VERSION", None)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            what = "has no STATE_VERSION" if version is None else f"has STATE_VERSION = {version!r}, not an int >= 1"
            raise BadStepModule(name, what, "define STATE_VERSION = 1 (an int, raised with each state change)")
        if not callable(getattr(module, "initial_state", None)):
            raise BadStepModule(name, "has no initial_state", "define initial_state(params: dict) -> dict")
        migrations = getattr(module, "MIGRATIONS", {})
        if not isinstance(migrations, dict) or not all(isinstance(k, int) and callable(v) for k, v in migrations.items()):
            raise BadStepModule(name, "has MIGRATIONS that is not {version: callable}",
                                "define MIGRATIONS = {1: migrate_v1_to_v2, ...} or leave it out")
        schema_sql = getattr(module, "SCHEMA_SQL", None)
        if schema_sql is not None and not isinstance(schema_sql, str):
            raise BadStepModule(name, "has SCHEMA_SQL that is not a string", "define SCHEMA_SQL = \"CREATE TABLE IF NOT EXISTS ...\"")
        setup = getattr(module, "setup", None)
        if setup is not None and not callable(setup):
            raise BadStepModule(name, "has a setup that is not callable", "define setup(conn) -> None, or leave it out")
        volatile = getattr(module, "NONDETERMINISTIC", ())
        if isinstance(volatile, str) or not all(isinstance(v, str) for v in volatile):
            raise BadStepModule(name, "has NONDETERMINISTIC that is not a tuple of field paths",
                                'define NONDETERMINISTIC = ("state.decided_at", "effect.mailer.sent_at"), or leave it out')
        previous = getattr(module, "PREVIOUS_STEPS", None)
        if previous is not None and (not isinstance(previous, str) or not previous.strip()):
            raise BadStepModule(name, f"has PREVIOUS_STEPS = {previous!r}, not a dotted module name",
                                'define PREVIOUS_STEPS = "mypkg.steps_v1" (the version before), or leave it out')
        return cls(name=name, start=start, steps=steps, state_version=version, initial_state=module.initial_state,
                   migrations=migrations, own_effects_sql=getattr(module, "OWN_EFFECTS_SQL", None),
                   schema_sql=schema_sql, setup=setup, nondeterministic=tuple(volatile), previous_steps=previous,
                   module=module)


def import_step_module(path: str) -> ModuleType:
    """Import ``path``; BadStepModule says whether the module or something it imports is missing."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not (path == exc.name or path.startswith(exc.name + ".")):
            # the step module exists, but something it imports does not
            raise BadStepModule(path, f"imports {exc.name!r}, which is not installed",
                                f"install {exc.name.split('.')[0]} in this environment, or run `python -c "
                                f"'import {path}'` to see the full error") from None
        raise BadStepModule(path, f"cannot be imported: {exc}",
                            "give a dotted module path importable from here (run from the project root or "
                            f"pip install your package), e.g. --steps {DEFAULT_STEPS}") from None
    except Exception as exc:  # a user's module may fail to import in any way
        raise BadStepModule(path, f"raised {type(exc).__name__}: {exc}",
                            f"run `python -c 'import {path}'` to see the full error") from None


def load_step_module(path: str = DEFAULT_STEPS) -> StepModule:
    """Import ``path`` (a dotted module name) and check it against the contract."""
    return StepModule.from_module(import_step_module(path), path)
