"""The harness's view of a step module (`--steps pkg.module`): loaded by the runtime's one loader
(`killpoint.reference_agent.step_module`), summarised as an `AgentSpec`, and every violation of the
contract turned into one usage error naming the module, the problem and the fix."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from killpoint.env import credentials, egress, timelimit
from killpoint.errors import EnvironmentProblem, UsageError
from killpoint.reference_agent.step_module import (  # the harness's one gate to the agent (tests/meta/test_imports.py)
    DEFAULT_STEPS,
    DONE,
    BadStepModule,
    StepModule,
    import_step_module,
)

TERMINAL = DONE
STEP_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
"""What a step may be called: the schedule grammar (`STEP:POINT:ACTION@N`, comma-separated) and a
single-quoted replay line hold these safely."""
if TYPE_CHECKING:  # psycopg costs ~0.4 s to import: `killpoint --help` must not pay it
    import psycopg

__all__ = ["DEFAULT_STEPS", "TERMINAL", "AgentSpec", "check", "ensure_schema", "import_env", "isolated", "load",
           "prepare"]


@dataclass(frozen=True)
class AgentSpec:
    """A loaded, checked step module. `digest` is SHA-256 of its source (recorded with every run)."""

    module: str
    start: str
    steps: tuple[str, ...]
    state_version: int
    digest: str
    own_effects_sql: str | None
    schema_sql: str | None = None
    has_setup: bool = False
    nondeterministic: tuple[str, ...] = ()
    previous_steps: str | None = None
    """The module's own `PREVIOUS_STEPS`: its previous version, for schema-upgrade without --previous-steps."""
    path: str | None = None
    """Where this version of `module` is imported from, first on the import path, when it is not the one
    installed (an earlier version taken from git, `killpoint.env.previous`); None: the ordinary import."""
    script: str | None = None
    """Its `MODEL_SCRIPT` as JSON ("null": it has none), as its probe read it; None: read it from the module,
    imported here (`model_script`): a script that is a function, or a module the probe did not import."""
    has_invariants: bool = True
    """Whether it may declare `INVARIANTS` (False only when its probe saw none: no import here to look)."""

    @property
    def key(self) -> str:
        """Names this version of the module: its name, and the folder of an earlier version."""
        return self.module if self.path is None else f"{self.module}@{self.path}"


_imports = threading.Lock()


@contextlib.contextmanager
def isolated(module: str, path: str | None) -> Iterator[None]:
    """Within: `module`'s top-level package is imported from `path` (first on `sys.path`), and the version
    imported before is out of `sys.modules`; after: everything is as it was. None: a no-op."""
    if path is None:
        yield
        return
    top = module.split(".")[0]

    def ours() -> list[str]:
        return [n for n in sys.modules if n == top or n.startswith(top + ".")]

    with _imports:
        saved = {n: sys.modules.pop(n) for n in ours()}
        sys.path.insert(0, path)
        importlib.invalidate_caches()
        try:
            yield
        finally:
            for n in ours():
                del sys.modules[n]
            sys.modules.update(saved)
            sys.path.remove(path)
            importlib.invalidate_caches()


def import_env(agent: AgentSpec) -> dict[str, str]:
    """What an incarnation's environment adds to run this version of the agent: for an earlier version,
    its folder first on PYTHONPATH (before the project's own folder); {} for the ordinary import."""
    if agent.path is None:
        return {}
    rest = (agent.path, os.getcwd(), os.environ.get("PYTHONPATH"))
    return {"PYTHONPATH": os.pathsep.join(p for p in rest if p)}


def model_script(agent: AgentSpec) -> object:
    """The step module's `MODEL_SCRIPT` (how the model fakes answer its requests, docs/tools.md), or None:
    as its probe read it where that was data, else from the module imported here."""
    if agent.script is not None:
        return json.loads(agent.script)
    return getattr(imported(agent), "MODEL_SCRIPT", None)


def imported(agent: AgentSpec) -> ModuleType:
    """The module of `agent`, imported in this process if it is not yet: what the harness itself calls of it
    (`setup(conn)`, a `MODEL_SCRIPT` function, `INVARIANTS`). A module `load` probed was imported without
    error in a child already; here it is imported as a worker does (`_import_here`)."""
    with isolated(agent.module, agent.path):
        return _loaded(agent.module)


def _loaded(module: str) -> ModuleType:
    """`module` as this process has it, imported first if it is not (`_import_here`)."""
    return sys.modules.get(module) or _import_here(module)


Prober = Callable[[str, float], AgentSpec]
"""Imports and checks a module somewhere that cannot hang or end the harness, within a limit, and returns its
spec (or raises its UsageError): `probe` (a child of its own), or a fork server's own import of it
(`ForkLauncher.probe`, which spares a session one import of the module)."""


def load(module: str, path: str | None = None, via: Prober | None = None) -> AgentSpec:
    """Import `module` and check the contract; every violation is one UsageError naming it and the fix.
    With `path`, the version of the module in that folder, imported in isolation (`isolated`). A user's module
    is checked by `via` where given, else by `probe`."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    if path is not None:
        with isolated(module, path):
            spec = load(module)
        return replace(spec, path=path)
    key = (module, tuple(sys.path))
    if key in _probed:  # the same spec however often it is loaded, even once the harness has imported it
        return _probed[key]
    if module not in sys.modules and not ours(module):  # the user's code: first where it cannot hang or end us
        with credentials.hidden():  # the child sees no real key either (docs/contracts.md section 8)
            _probed[key] = (via or probe)(module, timelimit.import_seconds())  # as the child checked it: not imported here
        return _probed[key]
    return check(_import_here(module), module)


_probed: dict[tuple[str, tuple[str, ...]], AgentSpec] = {}
"""The specs `probe` read, by module and import path: a module is probed once per process, as it would be
imported once."""


def _import_here(module: str) -> ModuleType:
    """Import `module` in this process as in a worker (no real key, no connection off the machine,
    docs/contracts.md) and within the import limit; each way it can fail is one UsageError naming it."""
    limit = timelimit.import_seconds()
    try:
        with credentials.hidden(), egress.guarding():
            return timelimit.within(limit, lambda: import_step_module(module))
    except BadStepModule as exc:
        raise UsageError("bad-steps-module", exc.message, exc.fix) from None
    except timelimit.TimedOut:
        sys.modules.pop(module, None)
        raise _timed_out(module, limit, "does it loop or wait at module level?") from None
    except SystemExit as exc:
        sys.modules.pop(module, None)
        raise UsageError("steps-import-exit", f"step module {module!r} called sys.exit({exc.code!r}) while being "
                         "imported", "remove the exit from module level (guard it with "
                         "`if __name__ == '__main__':`)") from None


def ours(module: str) -> bool:
    """True for killpoint's own modules (the reference agent, `killpoint.*`): their import needs no probe, as it
    runs none of the user's code (a probe of the reference agent is a fresh interpreter: ~0.24 s of CPU at
    a session's start-up)."""
    return module == "killpoint" or module.startswith("killpoint.")


STARTUP_SECONDS = 10.0
"""What a probe's interpreter may take to start, before its import begins (`probe`)."""
ALARM_GRACE_SECONDS = 2.0
"""What a probe may take past the import limit to answer its alarm with a report, before it is killed."""

_PROBE = "import sys; from killpoint.env.stepmodule import probe_child; probe_child(sys.argv[1], sys.argv[2])"


def probe(module: str, limit: float) -> AgentSpec:
    """Import and check `module` in a child process (`timelimit.in_child`), bounded from outside, and return
    its spec as the child read it: the harness itself need not import it (a framework's import costs
    seconds). A module that ignores SIGALRM, swallows BaseException, raises KeyboardInterrupt or
    GeneratorExit, or ends its process at import (`os._exit`, a signal) is one UsageError naming it, never a
    hang or the harness's own exit; so is each violation of the contract. A session with fork servers checks
    it by the first server's own import instead (`ForkLauncher.probe`: the same `probe_report`, read by the
    same `from_report`)."""
    child = timelimit.in_child([sys.executable, "-c", _PROBE, module, json.dumps(sys.path)],
                               limit + ALARM_GRACE_SECONDS, started_within=STARTUP_SECONDS)
    try:
        report = json.loads(child.report) if child.report else None
    except ValueError:
        report = child.report  # written by the module, not the check (`from_report`)
    return from_report(module, limit, report, child.exit_code)


def from_report(module: str, limit: float, report: object, exit_code: int | None) -> AgentSpec:
    """The spec of `module` from what the process that imported it reported (`probe_report`'s dict, or
    anything else it wrote, or None) and how it ended (`exit_code`: None if it was still importing when the
    limit and its grace ran out; negative: the signal that killed it); or the UsageError that says why not."""
    if exit_code is None:
        raise _timed_out(module, limit, "it loops or waits at module level, and ignored the time limit's signal")
    if report is not None and not isinstance(report, dict):
        raise _unreadable(module)
    if not isinstance(report, dict) and exit_code < 0:
        # A signal: the module's own (os.kill, os.abort) or another process's (the OOM killer, a timeout, a user);
        # the parent sees only its number, so the line names both.
        raise UsageError("steps-import-killed", f"step module {module!r} could not be checked: the process "
                         f"importing it was killed by {_signal_name(-exit_code)}, by the module itself (os.kill or os.abort at "
                         "module level) or from outside (the OOM killer, a timeout, a user)",
                         "remove any kill from the module's top level; if it has none, find what killed the process "
                         "(`dmesg` names the OOM killer's victims) and run again")
    if not isinstance(report, dict):
        raise UsageError("steps-import-exit", f"step module {module!r} ended its process while being imported (it "
                         f"exited with code {exit_code}, e.g. os._exit at module level), before it could be checked",
                         "remove the exit from module level (guard it with `if __name__ == '__main__':`)")
    if "timeout" in report:
        raise _timed_out(module, limit, "does it loop or wait at module level?")
    if "exit" in report:
        raise UsageError("steps-import-exit", f"step module {module!r} called sys.exit({report['exit']}) while "
                         "being imported", "remove the exit from module level (guard it with "
                         "`if __name__ == '__main__':`)")
    if "bad" in report:
        raise UsageError("bad-steps-module", *report["bad"])
    if "raised" in report:
        raise UsageError("bad-steps-module", f"step module {module!r} raised {report['raised']} while being "
                         "imported", f"run `python -c 'import {module}'` to see the full error")
    if "refused" in report:
        raise UsageError(*report["refused"])
    try:
        spec = report["spec"]
        return AgentSpec(**{**spec, "steps": tuple(spec["steps"]), "nondeterministic": tuple(spec["nondeterministic"])})
    except (KeyError, TypeError):  # the child wrote something else (a module that writes to our pipe?)
        raise _unreadable(module) from None


def _unreadable(module: str) -> UsageError:
    return UsageError("bad-steps-module", f"step module {module!r}: its check in a child process reported "
                      "nothing readable", f"run `python -c 'import {module}'` and check what it prints or writes "
                      "at import")


def probe_child(module: str, path: str) -> None:
    """The child of `probe`: import `module` with the parent's import path, within the import limit, and
    write what happened to the report pipe as one JSON object; then end at once (no atexit of the user's)."""
    sys.path[:] = json.loads(path)
    timelimit.started()
    with egress.guarding():  # no connection off the machine, as in a worker's import
        report = probe_report(module)
    os.write(int(os.environ[timelimit.REPORT_FD]), json.dumps(report).encode())
    os._exit(0)


def probe_report(module: str) -> dict[str, object]:
    """Import `module` within the import limit, in a process that may end for it (`probe_child`, a fork
    server that checks what it imports), and say what happened as `from_report` reads it. The caller guards
    the process's connections."""
    try:
        mod = timelimit.within(timelimit.import_seconds(), lambda: import_step_module(module))
        return _checked(mod, module)
    except BadStepModule as exc:
        return {"bad": [exc.message, exc.fix]}
    except timelimit.TimedOut:
        return {"timeout": True}
    except SystemExit as exc:
        return {"exit": repr(exc.code)}
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt, GeneratorExit...: the agent's, said as such
        return {"raised": _first_line(exc).rstrip(": ")}


def _checked(mod: ModuleType, module: str) -> dict[str, object]:
    """The probe's report of an imported module: its spec (`check`) with what the harness would otherwise
    import it for (its `MODEL_SCRIPT` as JSON where it is data; whether it has `INVARIANTS`), or the
    contract's refusal."""
    try:
        spec = asdict(check(mod, module))
    except UsageError as exc:
        return {"refused": [exc.code, exc.message, exc.fix]}
    spec["script"] = None  # by default the harness imports the module to read it (a function runs there)
    try:
        script = getattr(mod, "MODEL_SCRIPT", None)
        text = json.dumps(script)
        if json.loads(text) == script:  # data that JSON carries as it is (no tuple, no non-string key)
            spec["script"] = text
    except Exception:  # noqa: BLE001, S110 - a function, an object, a raising attribute: read in the harness
        pass
    try:
        spec["has_invariants"] = getattr(mod, "INVARIANTS", None) is not None
    except Exception:  # noqa: BLE001 - a raising attribute: looked for in the harness, which says why
        spec["has_invariants"] = True
    return {"ok": True, "spec": spec}


def _timed_out(module: str, limit: float, why: str) -> UsageError:
    return UsageError("steps-import-timeout", f"step module {module!r} did not finish importing within {limit:g} s "
                      f"({why})", "move that work into a step or setup(conn), or raise KILLPOINT_IMPORT_TIMEOUT "
                      "(seconds) if the import is only slow")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def check(mod: ModuleType, module: str) -> AgentSpec:
    """The AgentSpec of an imported module, or the UsageError of its first violation of the contract."""
    try:
        spec = StepModule.from_module(mod, module)
        steps = tuple(spec.steps)
    except BadStepModule as exc:
        raise UsageError("bad-steps-module", exc.message, exc.fix) from None
    except Exception as exc:  # a hostile shape: a module __getattr__ or a STEPS mapping that raises when read
        raise UsageError("bad-steps-module", f"step module {module!r}: reading its STEPS, START and the rest raised "
                         f"{_first_line(exc).rstrip(': ')}", "make STEPS a plain dict of step functions, and let "
                         "the module's attributes be read without raising (no module-level __getattr__ that "
                         "raises)") from None
    for step in steps:
        if not isinstance(step, str) or not STEP_NAME.match(step):
            raise UsageError("bad-step-name", f"step module {module!r} has a step named {step!r}; a step name is "
                             "written into schedules and replay lines, where ':', ',', '@', spaces and quotes "
                             "break them", "name steps with letters, digits, '_', '-' and '.' only, "
                             "e.g. 'send_email'")
    try:
        source = inspect.getsource(mod).encode()
    except (OSError, TypeError):
        source = module.encode()
    return AgentSpec(module=module, start=spec.start, steps=steps, state_version=spec.state_version,
                     digest=hashlib.sha256(source).hexdigest()[:16], own_effects_sql=spec.own_effects_sql,
                     schema_sql=spec.schema_sql, has_setup=spec.setup is not None,
                     nondeterministic=spec.nondeterministic, previous_steps=spec.previous_steps)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def ensure_schema(conn: psycopg.Connection) -> None:
    """Create the reference runtime's tables (contracts.md section 3) if they do not exist; safe from several
    processes at once. What an `Environment` is given as its `schema`, so that every worker finds them."""
    import psycopg

    from killpoint.reference_agent.schema import ensure_schema as create  # psycopg: imported on use only

    try:
        create(conn)
    except psycopg.Error as exc:  # a database that refuses the tables (a statement_timeout, an event trigger)
        raise EnvironmentProblem("dsn-unusable", f"creating the agent runtime's tables failed: {_first_line(exc)}",
                                 "check what the database and role impose on a session (statement_timeout, "
                                 "event triggers, default_transaction_read_only), or omit --dsn") from None


def submit_runs(conn: psycopg.Connection, module: str, run_ids: list[str], params: dict) -> None:
    """Start `run_ids` of the step module `module` as the reference runtime's application does (a first
    checkpoint and a resume job each), for queue workers to take (a fleet's runs)."""
    from killpoint.reference_agent.submit import submit  # psycopg: imported on use only

    submit(conn, module, run_ids, params)


def prepare(conn: psycopg.Connection, agent: AgentSpec) -> None:
    """Create the agent's own schema (`SCHEMA_SQL`, then `setup(conn)`) and check that its `OWN_EFFECTS_SQL`
    runs; each error is one UsageError naming the module, the part and the database's message."""
    import psycopg

    if agent.schema_sql:
        try:
            conn.execute(agent.schema_sql)  # type: ignore[arg-type]
        except psycopg.Error as exc:
            raise UsageError("bad-agent-schema", f"step module {agent.module!r}: SCHEMA_SQL failed: {_first_line(exc)}",
                             "fix the SQL (it runs once per database, before any run, so make it idempotent: "
                             "CREATE TABLE IF NOT EXISTS ...)") from None
    if agent.has_setup:
        with isolated(agent.module, agent.path):
            module = _loaded(agent.module)  # UsageError for an import that fails here (past the probe)
            try:
                module.setup(conn)
            except Exception as exc:  # a user's setup may fail in any way
                raise UsageError("bad-agent-schema", f"step module {agent.module!r}: setup(conn) raised "
                                 f"{_first_line(exc)}", f"fix {agent.module}.setup (it runs once per database, "
                                 "before any run)") from None
    if agent.own_effects_sql:
        try:
            with conn.transaction():
                conn.execute(agent.own_effects_sql, ("killpoint-check",)).fetchall()  # type: ignore[arg-type]
        except psycopg.Error as exc:
            raise UsageError("bad-own-effects-sql", f"step module {agent.module!r}: OWN_EFFECTS_SQL failed: "
                             f"{_first_line(exc)}",
                             "make OWN_EFFECTS_SQL a SELECT of the agent's own rows for one run id (%s), over "
                             "tables SCHEMA_SQL or setup(conn) creates") from None
