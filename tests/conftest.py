"""Shared fixtures: one Postgres per test session, one fresh database per test.

Starting a server costs ~0.1-0.5 s and a database ~10 ms, so the server is shared by the whole session and
isolation comes from giving every test its own database. The provider follows
``--killpoint-postgres`` / ``--killpoint-dsn`` when the killpoint pytest plugin is installed, else ``auto``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from killpoint.env.postgres import PostgresHandle, provide


def _option(config: pytest.Config, name: str, default: str | None) -> str | None:
    try:
        return config.getoption(name)
    except ValueError:  # the plugin (and so the option) is not registered: not pip-installed
        return default


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
def killpoint_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``killpoint ARGS...`` as a real subprocess (as a user would: no stdin, output captured).

    Uses ``python -m killpoint.cli.main`` from the checkout, so it works installed or not; a subprocess because
    exit codes, stderr lines and cleanup are only honest when the process really ends.
    """
    root = Path(__file__).resolve().parent.parent

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "killpoint.cli.main", *args],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    return run


@pytest.fixture(scope="session", autouse=True)
def _close_cli_sandboxes() -> Iterator[None]:
    """Close every CLI sandbox at the end of the session: their cluster roots live in the shared temp dir
    (the server's unprivileged user must reach them), where a test that failed before its own `close()`
    would otherwise leave them."""
    yield
    from helpers_harness import close_sandboxes

    close_sandboxes()
