"""Shared fixtures: one Postgres per test session, one fresh database per test, the CLI sandbox, and the zygotes
that fork the sessions' fork servers.

Starting a server costs ~0.1-0.5 s and a database ~10 ms, so the server is shared by the whole session and
isolation comes from giving every test its own database. The provider follows
``--killpoint-postgres`` / ``--killpoint-dsn`` when the killpoint pytest plugin is installed, else ``auto``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from killpoint.env.postgres import PostgresHandle, provide
from killpoint.env.zygote import ZYGOTE_VAR, Zygotes
from tests.helpers.sandbox import Sandbox, reap_stale_roots, without_zygote


def _option(config: pytest.Config, name: str, default: str | None) -> str | None:
    try:
        return config.getoption(name)
    except ValueError:  # the plugin (and so the option) is not registered: not pip-installed
        return default


NO_ZYGOTE_VAR = "KILLPOINT_TEST_ZYGOTE"
"""`KILLPOINT_TEST_ZYGOTE=0`: every session of the test run starts its fork servers itself."""


@pytest.fixture(scope="session", autouse=True)
def zygotes() -> Iterator[Zygotes | None]:
    """Two zygotes (harness/env/zygote.py) per test process, named in the environment every harness here
    inherits: the suite starts a few hundred sessions, each with two fork servers that would import the
    anthropic SDK and the reference worker (1.5-3.5 CPU-seconds apiece); forked from a zygote, they do not.
    What such a server differs in from a fresh one is listed in the module; tests/hostile keeps the real
    start (its conftest). Waited for (their imports overlap pytest's collection), so that every test uses
    them or, if they never get ready, none does."""
    if os.environ.get(NO_ZYGOTE_VAR) == "0":
        yield None
        return
    with Zygotes() as z:
        if not z.wait(120):
            yield None
            return
        os.environ[ZYGOTE_VAR] = str(z.folder)
        try:
            yield z
        finally:
            os.environ.pop(ZYGOTE_VAR, None)


@pytest.fixture(scope="session", autouse=True)
def stale_sandboxes() -> None:
    """Remove the cluster roots a killed test run's sandboxes left in memory or the temp folder, with any
    server still in them (`reap_stale_roots`): a test process that is SIGKILLed never runs `Sandbox.close`,
    and /dev/shm outlives it until the machine restarts."""
    reap_stale_roots()


@pytest.fixture(scope="module")
def no_zygote() -> Iterator[None]:
    """For a module of tests about how the harness's own fork servers start and end (its descendants, their
    parent-death signal): `pytestmark = pytest.mark.usefixtures("no_zygote")`."""
    with without_zygote():
        yield


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> Iterator[PostgresHandle]:
    """The session's Postgres (``provide("auto")`` unless options say otherwise).

    Session-scoped because a server start is the expensive part; torn down (server stopped, folder
    removed) when the session ends, whatever happened. Tests that crash or restart it must leave it
    running (``restart()``) for the tests after them; tests that need a server of their own use
    ``provide()`` directly.
    """
    kind = _option(request.config, "--killpoint-postgres", "auto") or "auto"
    dsn = _option(request.config, "--killpoint-dsn", None)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def say(msg: str) -> None:
        if reporter is not None:
            reporter.write_line(msg)

    with provide(kind=kind, dsn=dsn, on_choice=say) as pg:
        yield pg


@pytest.fixture
def pg_dsn(pg_server: PostgresHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A DSN to a fresh, empty database on the session server, named after the test.

    One database per test keeps tests independent without the cost of a server each; the name comes from
    the test id so a failing test's data is easy to find while the session runs. Dropped afterwards.
    """
    name = f"t_{request.node.name}"
    dsn = pg_server.create_database(name)
    yield dsn
    try:
        pg_server.drop_database(name)
    except psycopg.OperationalError:
        pass  # the test left the server crashed; the session teardown removes everything anyway


@pytest.fixture
def dsn_args(pg_dsn: str) -> list[str]:
    """`--dsn` of the test's fresh database, for the CLI run as a subprocess (`sandbox`): the session's server
    serves every subprocess, so none pays for a server start of its own."""
    return ["--dsn", pg_dsn, "--allow-any-dsn"]


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    """The CLI as a real subprocess in a sandbox of its own: cwd, TMPDIR, Postgres cluster root and a tag in
    its environment (see :class:`tests.helpers.sandbox.Sandbox`), so what a harness leaves behind can be
    counted. Whatever the test did, what its harness left is killed and its cluster root removed afterwards
    (the cluster root lives in the shared temp dir, where the server's unprivileged user can reach it, so one
    failure must not leak into the machine)."""
    with Sandbox(tmp_path / "sandbox") as box:
        yield box


LONGEST_FIRST = (
    "tests/examples/test_tool_agents.py",
    "tests/examples/test_dbos.py",
    "tests/examples/test_sdk_agent.py",
    "tests/meta/test_ci_templates.py",
    "tests/hostile/test_egress.py",
    "tests/examples/test_langgraph.py",
    "tests/examples/test_refund_agent.py",
    "tests/checkers/test_corpus.py",
    "tests/checkers/test_mutants.py",
    "tests/run/test_blackbox_checkpoint.py",
    "tests/reference_agent/test_agent_run.py",
    "tests/run/test_blackbox.py",
)
"""The test files that take the longest (each two to seven minutes of one worker, from `--durations=0` of a
whole-suite run from a clean clone on 2 December, the last), longest first."""


SLOW_FIXTURES = {
    "sandbox": "the CLI in a subprocess: a whole session (Postgres, fork servers, trials), 1-100 s",
    "pg_server": "a real Postgres: started once per test process, then trials or queries against it",
}
"""The fixtures that make a test `slow` (`-m 'not slow'`, the edit loop, leaves it out): what it needs is a
session or a database, not only Python. Tests that start such things themselves are in `SLOW_FILES`, or carry
the mark by hand."""

SLOW_FILES = {
    "tests/env/postgres/": "start, crash and reap Postgres servers of their own",
    "tests/env/test_zygote.py": "zygotes that import the SDK, and the servers they fork",
    "tests/env/test_reaper_security.py": "template builds killed mid-way",
    "tests/hostile/test_namespaces.py": "clusters owned by processes in other PID namespaces",
    "tests/meta/test_namespace_install.py": "a wheel built and installed in a venv",
    "tests/report/test_html_report.py": "headless Chromium",
    "tests/scenarios/test_scenario_db_crash.py": "a Postgres of its own, crashed",
    "tests/run/test_judge.py": "sessions recorded and judged again",
    "tests/cli/test_cli_basic.py": "signals to a CLI holding a server",
}
"""Test files (or folders) that are slow as a whole, and why."""


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """This suite's own plugin sessions (tests/cli/test_plugin.py) write their run directories under pytest's
    temporary directory, not the repository's `.killpoint/runs` (the plugin's default for a user's suite,
    where they are kept to be read; here nobody reads them, and they would pile up in the checkout)."""
    if config.getoption("--killpoint-out", None) is None:
        config.option.killpoint_out = str(config._tmp_path_factory.getbasetemp() / "killpoint-runs")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use `SLOW_FIXTURES` slow. Then the longest files first, the rest in their order:
    `--dist loadfile` hands files to workers in collection order, so a long file met last would keep one worker
    busy while the other idles."""
    for item in items:
        path = item.nodeid.partition("::")[0]
        if SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())) or any(map(path.startswith, SLOW_FILES)):
            item.add_marker(pytest.mark.slow)
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))
