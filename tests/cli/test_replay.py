"""Replaying a failing schedule gives the same verdict and the same event trace, and the replay line the
harness prints reproduces the failure.

The failing agent is `tests.gallery.variants.no_email_key` (the invoice agent without an idempotency key on its
email): killed after the mailer applied the email, the resumed step sends it again.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.history import trace
from killpoint.run.trial import Session, Trial
from tests.helpers.checks import describe, failing_checkers
from tests.helpers.harness import BROKEN_AGENT, harness_session
from tests.helpers.sandbox import Sandbox

FAILING = "email:effect.applied:kill"


@pytest.fixture(scope="module")
def sessions(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, Session]]:
    """Two independent harness sessions (own environment, database, services, fork server) on the broken agent."""
    with harness_session(pg_server, tmp_path_factory.mktemp("replay-a"), "test_replay_a", steps=BROKEN_AGENT) as a, \
            harness_session(pg_server, tmp_path_factory.mktemp("replay-b"), "test_replay_b", steps=BROKEN_AGENT) as b:
        yield a, b


def run_trace(t: Trial) -> list[tuple]:
    return trace(t.evidence.events, replace={t.run_id: "<run>"})


def test_failing_schedule_replays_with_same_verdict_and_trace(sessions: tuple[Session, Session]) -> None:
    first, second = (s.trial(Schedule.parse(FAILING, s.agent.steps)) for s in sessions)
    assert first.outcome == second.outcome == "fail"
    failing = [v.checker for v in first.failing()]
    assert "exactly_once" in failing and failing == [v.checker for v in second.failing()]
    assert [v.to_dict() for v in first.verdicts] == [v.to_dict() for v in second.verdicts]
    assert run_trace(first) == run_trace(second)
    # the trace is the run's story: one fault, one SIGKILL, a resumed incarnation that emails again
    types = [row[0] for row in run_trace(first)]
    assert types.count("fault") == 1 and types.count("inc.start") == 2
    emails = [e for e in first.evidence.effects if e["service"] == "mailer"]
    assert len(emails) == 2


def test_baselines_have_the_same_trace(sessions: tuple[Session, Session]) -> None:
    a, b = (s.baseline() for s in sessions)
    assert a.run_id == b.run_id
    assert trace(a.events, replace={a.run_id: "<run>"}) == trace(b.events, replace={b.run_id: "<run>"})


def test_multi_fault_schedule_replays_the_same(sessions: tuple[Session, Session]) -> None:
    """A passing multi-fault schedule (kill, then term of the resumed incarnation, then kill again)."""
    text = "charge:effect.responded:kill,charge:step.start:term@2,email:checkpoint.writing:kill"
    first, second = (s.trial(Schedule.parse(text), prefix="multi") for s in sessions)
    assert [v.to_dict() for v in first.verdicts] == [v.to_dict() for v in second.verdicts]
    assert run_trace(first) == run_trace(second)
    assert [row[0] for row in run_trace(first)].count("fault") == 3


# ---- through the CLI: the printed replay line reproduces the failure ---------------------------------------

def test_printed_replay_line_reproduces_the_failure(pg_server: PostgresHandle, sandbox: Sandbox) -> None:
    dsn = pg_server.create_database("test_replay_cli")  # one database for both: a kept --dsn database
    try:
        env_args = ["--dsn", dsn, "--allow-any-dsn", "--out", str(sandbox.out), "--quiet"]
        first = sandbox.run("replay", "--scenario", "crash-points", "--schedule", FAILING, "--steps", BROKEN_AGENT,
                            *env_args)
        assert first.returncode == 1, describe(first)
        assert "exactly_once" in failing_checkers(first.stdout), describe(first)
        lines = [ln.strip() for ln in first.stdout.splitlines() if ln.strip().startswith("replay:")]
        assert len(lines) == 1, describe(first)
        argv = shlex.split(lines[0].removeprefix("replay:").strip())
        assert argv[:2] == ["killpoint", "replay"] and FAILING in argv and BROKEN_AGENT in argv, argv
        again = sandbox.run(*argv[1:], *env_args)
        assert again.returncode == 1, describe(again)
        assert failing_checkers(again.stdout) == failing_checkers(first.stdout)
        assert f"schedule: {FAILING}" in again.stdout
        assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
        assert len([p for p in Path(sandbox.out).iterdir() if (p / "verdicts.json").exists()]) == 2
    finally:
        pg_server.drop_database("test_replay_cli")
