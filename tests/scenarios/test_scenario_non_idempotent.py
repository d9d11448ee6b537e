"""non-idempotent-downstream, the negative control: the harness must find the webhook's duplicate window,
report it as an expected finding whose replay line reproduces it, and fail when there is nothing to find
or when something else fails."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import failed, passed
from killpoint.cli.commands import finish
from killpoint.cli.config import Invocation
from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.report.text import trial_block
from killpoint.run.config import SessionConfig
from killpoint.run.scenario import Context, ScenarioResult
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.non_idempotent_downstream import NonIdempotentDownstream
from tests.helpers.checks import describe
from tests.helpers.harness import harness_session
from tests.helpers.sandbox import Sandbox

WINDOW = "notify:effect.responded:kill"


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("non-idempotent"), "t_scenario_non_idempotent") as s:
        yield s


@pytest.fixture(scope="module")
def outcome(session: Session) -> tuple[list[Trial], ScenarioResult]:
    """The scenario as `killpoint run` runs it, once for the module."""
    scenario = NonIdempotentDownstream()
    started = time.monotonic()
    trials = scenario.run(Context(session=session))
    return trials, scenario.result(trials, started)


def _replay_line(result: ScenarioResult, session: Session) -> str:
    finding = next(t for t in result.trials if str(t.schedule) == WINDOW)
    block = trial_block(result.name, finding, session.agent.module, "EXPECTED FINDING")
    return next(line.split("replay:", 1)[1].strip() for line in block if line.strip().startswith("replay:"))


def test_the_window_is_found_and_counted_as_expected(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    trials, result = outcome
    assert result.outcome == "expected", result.reason
    found = {str(t.schedule) for t in trials if t.outcome == "fail"}
    assert WINDOW in found
    assert all(s.startswith("notify:") and s.endswith(":kill") for s in found), found
    assert all(t.outcome == "pass" for t in trials if str(t.schedule) not in found)
    assert {t.schedule.faults[0].step for t in trials} == {"plan", "validate", "charge", "email", "notify", "record"}
    assert "window found" in result.figures


def test_the_run_command_reports_it_as_an_expected_finding(outcome: tuple[list[Trial], ScenarioResult],
                                                            session: Session, capsys: pytest.CaptureFixture[str]) -> None:
    _, result = outcome
    code = finish(Invocation(SessionConfig(session.agent.module, session.env.run_dir)), session, [result],
                  {"command": "run"})
    out = capsys.readouterr().out
    assert code == 0  # an expected finding is neither a pass nor a failure of the suite
    assert out.splitlines()[1].startswith("EXPECTED ")
    assert "--- EXPECTED FINDING: non-idempotent-downstream" in out
    # the window's two faults are one finding: one block (with its replay line) and the other counted under it
    replays = re.findall(r"killpoint replay --scenario non-idempotent-downstream --schedule '(notify:[a-z.]+:kill)'", out)
    assert replays and set(replays) <= {"notify:effect.applied:kill", WINDOW}, out
    assert "also at 1 schedule in scenario non-idempotent-downstream" in out


def test_the_replay_line_reproduces_the_finding(outcome: tuple[list[Trial], ScenarioResult], session: Session,
                                                pg_server: PostgresHandle, sandbox: Sandbox) -> None:
    _, result = outcome
    argv = shlex.split(_replay_line(result, session))
    assert argv[:2] == ["killpoint", "replay"] and "--steps" not in argv
    dsn = pg_server.create_database("t_non_idempotent_replay")
    try:
        proc = sandbox.run(*argv[1:], "--dsn", dsn, "--allow-any-dsn", "--quiet", "--out", str(sandbox.out))
    finally:
        pg_server.drop_database("t_non_idempotent_replay")
    assert proc.returncode == 0, describe(proc)
    assert "EXPECTED FINDING" in proc.stdout and "exactly_once: fail: effects done twice" in proc.stdout, describe(proc)
    assert "extra x1: webhook" in proc.stdout
    assert sandbox.survivors() == []


class _WindowClosed(NonIdempotentDownstream):
    """The webhook agent whose notify goes through a keyed downstream; only notify's points, for speed."""

    steps = "tests.gallery.variants.webhook_keyed"

    def step_points(self, ctx: Context) -> dict[str, list[str]]:
        return {"notify": super().step_points(ctx)["notify"]}


def test_a_missed_window_is_a_failure_of_the_harness(session: Session) -> None:
    scenario = _WindowClosed()
    started = time.monotonic()
    trials = scenario.run(Context(session=session))
    assert len(trials) >= 4
    assert all(t.outcome == "pass" for t in trials), [
        (str(t.schedule), [v.to_dict() for v in t.verdicts if v.outcome != "pass"]) for t in trials if t.outcome != "pass"]
    result = scenario.result(trials, started)
    assert result.outcome == "fail"
    assert result.reason == "negative control: the expected finding was not produced"
    assert scenario.figures(trials) == "window NOT found"


def _trial(name: str, *verdicts: object) -> Trial:
    return Trial(name, Schedule.parse(WINDOW), None, Evidence(run_id=name), list(verdicts))  # type: ignore[arg-type]


def test_another_failure_is_not_passed_off_as_the_finding() -> None:
    duplicate = _trial("r1", failed("exactly_once", "effects done twice", ["extra x1: webhook key=None {}"]),
                       passed("completes", "done"))
    lost = _trial("r2", failed("completes", "ended at cursor 'notify'"))
    charged_twice = _trial("r3", failed("exactly_once", "effects done twice", ["extra x1: ledger key=<run>:charge {}"]))
    scenario = NonIdempotentDownstream()
    assert scenario.result([duplicate], time.monotonic()).outcome == "expected"
    for other in (lost, charged_twice):
        result = scenario.result([duplicate, other], time.monotonic())
        assert result.outcome == "fail"
        assert "1 trial(s) failed otherwise than by the expected finding" in result.reason
