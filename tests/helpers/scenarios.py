"""Helpers for the scenario tests: run a scenario as `killpoint run` does, explain failures, and a Session
on a Postgres killpoint owns (for db-crash)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from killpoint.env.environment import Environment
from killpoint.env.postgres import PostgresHandle
from killpoint.env.stepmodule import DEFAULT_STEPS, load
from killpoint.errors import KillpointError
from killpoint.reference_agent.schema import ensure_schema
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.run.scenario import Context, Scenario, ScenarioResult
from killpoint.run.trial import Session, Trial
from tests.helpers import pythonpath
from tests.helpers.harness import harness_session


def module_session(db: str) -> Any:
    """A module-scoped `session` fixture: a harness Session on database `db` of the test Postgres."""
    @pytest.fixture(scope="module")
    def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
        with harness_session(pg_server, tmp_path_factory.mktemp(db), db) as s:
            yield s
    return session


def module_outcome(make: Callable[[], Scenario]) -> Any:
    """A module-scoped `outcome` fixture: the scenario run once on the module's session, as `killpoint run`
    runs it: (trials, result)."""
    @pytest.fixture(scope="module")
    def outcome(session: Session) -> tuple[list[Trial], ScenarioResult]:
        return run_scenario(make(), Context(session=session))
    return outcome


def run_scenario(scenario: Scenario, ctx: Context) -> tuple[list[Trial], ScenarioResult]:
    """The scenario's trials and its result line, as `killpoint run` builds them."""
    started = time.monotonic()
    trials = scenario.run(ctx)
    return trials, scenario.result(trials, started)


def why(trials: list[Trial]) -> str:
    """The failing or undecided verdicts of `trials`, one per line (for assertion messages)."""
    return "\n".join(f"{t.run_id} {t.schedule}: {v.checker}: {v.outcome}: {v.reason} {list(v.evidence)}"
                     for t in trials for v in t.verdicts if v.outcome != "pass")


def failing(trial: Trial) -> set[str]:
    return {v.checker for v in trial.failing()}


@contextlib.contextmanager
def owned_session(run_dir: Path) -> Iterator[Session]:
    """A Session on a Postgres of its own (`auto`: local, docker or embedded), which db-crash may kill;
    skips the test when this machine has none."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", pythonpath())  # workers import `tests.gallery` variants too
        agent = load(DEFAULT_STEPS)
        history = History(run_dir / "history.jsonl")
        try:
            env = Environment(postgres="auto", run_dir=run_dir, preload=[agent.module], schema=ensure_schema)
            try:
                env.__enter__()
            except KillpointError as exc:
                pytest.skip(f"no Postgres killpoint can own here: {exc.message}")
            try:
                yield Session(env, history, agent, RunOptions())
            finally:
                env.__exit__(None, None, None)
        finally:
            history.close()
