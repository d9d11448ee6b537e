"""killpoint's pytest plugin: options in one group and fixtures; it imports nothing heavy at load time.

A user's crash test:

    def test_email_survives_a_kill(killpoint_session):
        trial = killpoint_session.trial(Schedule.parse("email:effect.applied:kill"))
        assert trial.outcome == "pass", trial.failing()

Choose the agent with `--killpoint-steps pkg.module` (or the `killpoint_steps` fixture) and the
database with `--killpoint-postgres` / `--killpoint-dsn`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from killpoint.run.trial import Session


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


@pytest.fixture(scope="session")
def killpoint_steps(pytestconfig: pytest.Config) -> str:
    """The step module under test; override this fixture to pin one in a conftest."""
    from killpoint.env.stepmodule import DEFAULT_STEPS

    return pytestconfig.getoption("--killpoint-steps") or DEFAULT_STEPS


@pytest.fixture(scope="session")
def killpoint_session(pytestconfig: pytest.Config, killpoint_steps: str,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """A harness session (Postgres, fake services, fork server) shared by the whole test session.

    Session-scoped because starting Postgres and preloading the agent cost about two seconds, while a
    trial costs well under one; every trial uses its own run id, so tests do not see each other.
    """
    from killpoint.env.environment import Environment
    from killpoint.env.stepmodule import load
    from killpoint.reference_agent.schema import ensure_schema
    from killpoint.run.history import History
    from killpoint.run.options import RunOptions
    from killpoint.run.trial import Session

    agent = load(killpoint_steps)
    run_dir = tmp_path_factory.mktemp("killpoint-run")
    dsn = pytestconfig.getoption("--killpoint-dsn")
    history = History(run_dir / "history.jsonl")
    with Environment(postgres="dsn" if dsn else pytestconfig.getoption("--killpoint-postgres"), dsn=dsn,
                     spawn=pytestconfig.getoption("--killpoint-spawn"), preload=[agent.module], run_dir=run_dir,
                     schema=ensure_schema) as env:
        yield Session(env, history, agent, RunOptions())
    history.close()
