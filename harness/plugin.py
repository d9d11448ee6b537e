"""killpoint's pytest plugin: options in one group, a marker and fixtures; it imports nothing heavy at load
time (the work is in `killpoint.testing` and `killpoint.run.points`).

A user's crash tests:

    import killpoint

    def test_email_survives_a_kill(killpoint_session):
        trial = killpoint_session.trial(killpoint.Schedule.parse("email:effect.applied:kill"))
        killpoint.expect(trial)          # fails with the CLI's block: evidence, schedule, replay, run dir

    def test_every_single_fault(killpoint_session, killpoint_schedule):
        killpoint.expect(killpoint_session.trial(killpoint_schedule))   # one test id per schedule

    def test_crash_points(killpoint_scenario):
        killpoint.expect(killpoint_scenario("crash-points"))

1. `killpoint_schedule` parametrizes a test over the agent's exhaustive single faults (each its own test
   id, e.g. `test_every_single_fault[email:effect.applied:kill]`), from the points its crash-free run
   reaches (`run.points`, measured once per agent digest and cached); `@pytest.mark.killpoint(steps=...)`
   names another agent for one test.
2. Every test that uses a killpoint fixture carries the `killpoint` marker (`pytest -m killpoint`).
3. At the session's end the run directory gets `verdicts.json` and `meta.json` (`testing.write_session`),
   and the terminal summary names it. Under pytest-xdist every worker is its own session with its own run
   directory (named after the worker); the workers may share one database (`--killpoint-dsn`), so each
   names its runs after itself (`run-3.gw1`) and no two workers drive the same run id. A worker hands its
   run directory to the controller (`workeroutput`), whose terminal summary names every worker's.
4. Run directories go under `--killpoint-out`, else under `.killpoint/runs/` of pytest's rootdir (named
   `TIME-pytest-PID[-WORKER]`), where they outlive pytest's temporary directories (it keeps three).

Choose the agent with `--killpoint-steps pkg.module` (or the `killpoint_steps` fixture), or a black-box
worker with `--killpoint-worker-cmd 'python graph.py {run_id}'` and `--killpoint-adapter langgraph` (the
CLI's `--worker-cmd` and `--adapter`: a LangGraph graph, a DBOS workflow, a worker in any language), with
`--killpoint-worker-preload MOD,...|none` and `--killpoint-exit-codes killpoint|none` (the CLI's
`--worker-preload` and `--exit-codes`), the hosts a worker may reach besides loopback with
`--killpoint-allow-egress HOST` (the CLI's `--allow-egress`; the crash-free run measured for
`killpoint_schedule` gets them too), the database with `--killpoint-postgres` / `--killpoint-dsn`, HTTP
services recorded through a proxy with `--killpoint-effect NAME=URL[,id=PATH]` (the CLI's `--effect`), and
where run directories go with `--killpoint-out` (default: `.killpoint/runs/` under pytest's rootdir).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from killpoint.run.config import SessionConfig
    from killpoint.run.scenario import ScenarioResult
    from killpoint.run.trial import Session

FIXTURES = ("killpoint_session", "killpoint_schedule", "killpoint_scenario")
RUN_DIRS = pytest.StashKey[list]()


@dataclass(frozen=True)
class WorkerOptions:
    """The plugin's options for the worker, checked once at configuration (`_worker`) as the CLI checks its
    own; the defaults are a session with none of them given (the reference runtime, loopback only)."""

    command: str | None = None
    """`--killpoint-worker-cmd` (the CLI's `--worker-cmd`), or None: the step module."""
    adapter: str | None = None
    """`--killpoint-adapter` (the CLI's `--adapter`), or None: the default."""
    preload: tuple[str, ...] | None = None
    """`--killpoint-worker-preload` (the CLI's `--worker-preload`): None chosen from the script's imports, ()
    none."""
    allow_egress: tuple[str, ...] = ()
    """`--killpoint-allow-egress` (the CLI's `--allow-egress`): hosts a worker may reach besides loopback."""
    exit_codes: str | None = None
    """`--killpoint-exit-codes` (the CLI's `--exit-codes`), or None: `default_exit_codes(command)`."""


WORKER = pytest.StashKey[WorkerOptions]()
"""The worker's options, stashed at configuration when any of them is given (`WORKER_OPTIONS`)."""
WORKER_OPTIONS = ("--killpoint-worker-cmd", "--killpoint-adapter", "--killpoint-worker-preload",
                  "--killpoint-allow-egress", "--killpoint-exit-codes")
"""The options `_worker` reads; with none of them given nothing is checked (nor imported) at configuration."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("killpoint", "killpoint crash testing")
    group.addoption("--killpoint-postgres", action="store", default="auto",
                    help="Postgres provider for killpoint fixtures: auto|docker|local|embedded|dsn (default: auto)")
    group.addoption("--killpoint-dsn", action="store", default=None,
                    help="DSN of a test database for the killpoint fixtures")
    group.addoption("--killpoint-steps", action="store", default=None,
                    help="step module of the agent under test (default: the reference invoice agent)")
    group.addoption("--killpoint-spawn", action="store", default="fork", choices=["fork", "exec"],
                    help="incarnations from a preloaded fork server (fast) or fresh interpreters")
    group.addoption("--killpoint-jobs", action="store", type=int, default=None,
                    help="schedules of a scenario run at the same time (default: the number of cores, and up to 4 "
                         "per core while the cores idle)")
    group.addoption("--killpoint-effect", action="append", default=None, metavar="NAME=URL[,id=PATH]",
                    help="record the effects sent to an HTTP service through a proxy (repeatable), as the CLI's "
                         "--effect: the worker gets the run's URL in KILLPOINT_EFFECT_<NAME>_URL; id=PATH says "
                         "where the service's answers carry the object's id (e.g. id=ticket.id)")
    group.addoption("--killpoint-worker-cmd", action="store", default=None, metavar="CMD",
                    help="a black-box worker's command instead of a step module, as the CLI's --worker-cmd "
                         "(e.g. 'python graph.py {run_id}'): a LangGraph graph, a DBOS workflow, any language")
    group.addoption("--killpoint-adapter", action="store", default=None, metavar="NAME",
                    help="where the black-box worker's runtime keeps its records, as the CLI's --adapter: "
                         "checkpoints (the default), langgraph, dbos")
    group.addoption("--killpoint-worker-preload", action="store", default=None, metavar="MOD,...|none",
                    help="with a --killpoint-worker-cmd that runs a Python script or -m module: the modules its "
                         "fork servers import before forking each incarnation, as the CLI's --worker-preload "
                         "(default: the libraries the script imports at its top level; none: a fresh "
                         "interpreter per incarnation)")
    group.addoption("--killpoint-exit-codes", action="store", default=None, choices=["killpoint", "none"],
                    help="hold the worker to killpoint's exit-code convention or to none, as the CLI's "
                         "--exit-codes (default: killpoint, none with --killpoint-worker-cmd)")
    group.addoption("--killpoint-allow-egress", action="append", default=None, metavar="HOST",
                    help="a host a worker may reach besides loopback and the --killpoint-dsn server, as the "
                         "CLI's --allow-egress (repeatable; '*': any)")
    group.addoption("--killpoint-out", action="store", default=None,
                    help="where the session's run directory goes (default: .killpoint/runs under the rootdir)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "killpoint(steps=None): a crash test of an agent; `steps` names the step "
                            "module whose single faults `killpoint_schedule` runs")
    config.stash[RUN_DIRS] = []
    if any(config.getoption(name) is not None for name in WORKER_OPTIONS):
        config.stash[WORKER] = _worker(config)  # a bad one is a usage error now, before collection


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Flow step 2: a test using a killpoint fixture is a `killpoint` test."""
    for item in items:
        if any(f in getattr(item, "fixturenames", ()) for f in FIXTURES) and not item.get_closest_marker("killpoint"):
            item.add_marker(pytest.mark.killpoint)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Flow step 1: `killpoint_schedule` runs once per single fault of the agent (at each occurrence a loop
    reaches, as the CLI's exhaustive sweep), each its own test id."""
    if "killpoint_schedule" not in metafunc.fixturenames:
        return
    from killpoint.run.points import crash_free_run, single_faults

    config = metafunc.config
    marker = metafunc.definition.get_closest_marker("killpoint")
    pinned = marker.kwargs.get("steps") if marker else None  # a step module named for this test: no worker
    steps = pinned or _steps(config)
    dsn = config.getoption("--killpoint-dsn")
    worker = config.stash.get(WORKER, WorkerOptions())
    if pinned:  # the hosts it may reach and its exit codes stay the session's
        worker = replace(worker, command=None, adapter=None, preload=None)
    points, occurrences = crash_free_run(steps, postgres=config.getoption("--killpoint-postgres"), dsn=dsn,
                                         worker_cmd=worker.command, adapter=worker.adapter,
                                         allow_egress=worker.allow_egress, worker_preload=worker.preload,
                                         exit_codes=worker.exit_codes)
    schedules = single_faults(points, occurrences=occurrences)
    metafunc.parametrize("killpoint_schedule", schedules, ids=[str(s) for s in schedules])


WORKER_RUN_DIRS = "killpoint_run_dirs"
"""The key of a pytest-xdist worker's `workeroutput` that carries its run directories to the controller."""


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # noqa: ANN001
    """Flow step 3 (xdist controller): a worker ended; keep the run directories it handed over."""
    dirs = getattr(node, "workeroutput", {}).get(WORKER_RUN_DIRS, [])
    node.config.stash.setdefault(RUN_DIRS, []).extend(Path(d) for d in dirs)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    """Flow step 3: name the run directories (verdicts.json, history.jsonl, worker logs)."""
    for run_dir in sorted(config.stash.get(RUN_DIRS, []), key=str):
        terminalreporter.write_line(f"killpoint run directory: {run_dir} (killpoint report {run_dir})")


def _steps(config: pytest.Config) -> str:
    from killpoint.env.stepmodule import DEFAULT_STEPS

    return config.getoption("--killpoint-steps") or DEFAULT_STEPS


def _worker(config: pytest.Config) -> WorkerOptions:
    """The worker's options (`WORKER_OPTIONS`), checked as the CLI checks `--worker-cmd`, `--adapter`,
    `--worker-preload` and `--allow-egress` (a command that cannot start, an adapter or a preload with no
    worker, an unknown adapter, a preload that names no modules, a URL or a pattern for a host; pytest's
    parser already refused a `--killpoint-exit-codes` other than killpoint or none): a bad one is a usage
    error of pytest's naming the plugin's option, before any session starts."""
    import argparse

    from killpoint.cli.config import adapter_option, worker_preload_option
    from killpoint.cli.validate import egress_host
    from killpoint.cli.validate import worker_cmd as checked
    from killpoint.errors import UsageError

    command, adapter = config.getoption("--killpoint-worker-cmd"), config.getoption("--killpoint-adapter")
    preload = config.getoption("--killpoint-worker-preload")
    try:
        if command is not None:
            try:
                checked(command)
            except argparse.ArgumentTypeError as exc:  # an empty command, unbalanced quotes
                raise UsageError("bad-option", f"--killpoint-worker-cmd: {exc}", "give the command that starts "
                                 "one worker, e.g. 'python graph.py {run_id}'") from None
        adapter_option(adapter, command)
        if adapter is not None:
            from killpoint.adapters import get

            try:
                get(adapter)
            except UsageError as exc:
                raise UsageError(exc.code, f"--adapter: {exc.message}", exc.fix) from None
        modules = worker_preload_option(preload, command)
        hosts = tuple(egress_host(h) for h in config.getoption("--killpoint-allow-egress") or ())
    except UsageError as exc:
        raise pytest.UsageError(_plugin_names(exc.line())) from None
    return WorkerOptions(command=command, adapter=adapter, preload=modules, allow_egress=hosts,
                         exit_codes=config.getoption("--killpoint-exit-codes"))


def _plugin_names(line: str) -> str:
    """A CLI error's line with the CLI's worker options named as the plugin's (`--worker-cmd` ->
    `--killpoint-worker-cmd`), so a pytest user reads the option they gave."""
    return re.sub(r"(?<![\w-])--(worker-cmd|adapter|worker-preload|allow-egress|exit-codes)\b", r"--killpoint-\1",
                  line)


def session_config(config: pytest.Config, steps: str, tmp_path_factory: pytest.TempPathFactory) -> SessionConfig:
    """The session's configuration from the plugin's options, the worker's (`WORKER`) put into
    `SessionConfig` and `RunOptions` as the CLI's `invocation` puts its own. Its run directory (flow step
    4): under `--killpoint-out`, else under `.killpoint/runs` of the rootdir, named after the time, pid and xdist
    worker (`tmp_path_factory` is no longer used: pytest deletes all but its last three sessions'). Under
    pytest-xdist each worker names its runs after itself, after the number, so the scenario a run id names
    (before its last `-`) is unchanged."""
    from killpoint.cli.args import default_jobs, effects_option
    from killpoint.errors import UsageError
    from killpoint.run.config import SessionConfig
    from killpoint.run.options import RunOptions, default_exit_codes

    try:
        effects = effects_option(config.getoption("--killpoint-effect"), "--killpoint-effect")
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None

    out = config.getoption("--killpoint-out") or config.rootpath / ".killpoint" / "runs"
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    run_dir = Path(out) / f"{time.strftime('%Y%m%d-%H%M%S')}-pytest-{os.getpid()}{'-' + worker if worker else ''}"
    dsn = config.getoption("--killpoint-dsn")
    chosen = config.stash.get(WORKER, WorkerOptions())
    return SessionConfig(steps=steps, run_dir=run_dir, dsn=dsn, worker_cmd=chosen.command, adapter=chosen.adapter,
                         worker_preload=chosen.preload, allow_egress=chosen.allow_egress,
                         options=RunOptions(exit_codes=chosen.exit_codes or default_exit_codes(chosen.command)),
                         postgres="dsn" if dsn else config.getoption("--killpoint-postgres"),
                         spawn=config.getoption("--killpoint-spawn"),
                         jobs=max(1, config.getoption("--killpoint-jobs") or default_jobs()),
                         widen=not config.getoption("--killpoint-jobs"),
                         effects=effects, run_id_suffix=f".{worker}" if worker else "")


@pytest.fixture(scope="session")
def killpoint_steps(pytestconfig: pytest.Config) -> str:
    """The step module under test; override this fixture to pin one in a conftest."""
    return _steps(pytestconfig)


@pytest.fixture(scope="session")
def _killpoint_results() -> list:
    """The scenarios `killpoint_scenario` ran whole this session (for verdicts.json)."""
    return []


@pytest.fixture(scope="session")
def killpoint_session(pytestconfig: pytest.Config, killpoint_steps: str, _killpoint_results: list,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """A harness session (Postgres, fake services, fork server) shared by the whole test session.

    Session-scoped because starting Postgres and preloading the agent cost about two seconds, while a
    trial costs well under one; every trial uses its own run id, so tests do not see each other. At the
    end its run directory gets verdicts.json and meta.json (`killpoint.testing.write_session`).
    """
    from killpoint.run.opening import open_session
    from killpoint.testing import write_session

    config = session_config(pytestconfig, killpoint_steps, tmp_path_factory)
    with open_session(config) as session:
        try:
            yield session
        finally:
            write_session(session, _killpoint_results, {"command": "pytest",
                                                        "xdist_worker": os.environ.get("PYTEST_XDIST_WORKER")})
            pytestconfig.stash[RUN_DIRS].append(config.run_dir)
            if hasattr(pytestconfig, "workeroutput"):  # an xdist worker: the controller prints the summary
                pytestconfig.workeroutput.setdefault(WORKER_RUN_DIRS, []).append(str(config.run_dir))


@pytest.fixture
def killpoint_scenario(killpoint_session: Session, _killpoint_results: list) -> Callable[..., ScenarioResult]:
    """`killpoint_scenario(name, seed=0, budget=60.0)` runs a registered scenario whole and returns its
    `ScenarioResult`; pass it to `killpoint.expect`."""
    from killpoint.testing import run_scenario

    def run(name: str, **kwargs) -> ScenarioResult:  # noqa: ANN003
        result = run_scenario(killpoint_session, name, **kwargs)
        _killpoint_results.append(result)
        return result

    return run
