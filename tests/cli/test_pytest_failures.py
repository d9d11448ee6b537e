"""A user's crash tests under pytest, run as a real inner pytest (a subprocess) on the test Postgres: a failing
trial shows the CLI's block, the run directory is complete, single faults parametrize a test, a scenario runs
as a test, and the `killpoint` marker selects them."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from killpoint.faults.schedule import exhaustive
from killpoint.run.points import crash_free_points
from tests.helpers.harness import BROKEN_AGENT
from tests.helpers.inner_pytest import inner_pytest as run_inner

USER_TESTS = '''
import pytest
import killpoint

def test_email_kill(killpoint_session):
    trial = killpoint_session.trial(killpoint.Schedule.parse("email:effect.applied:kill"))
    killpoint.expect(trial)

@pytest.mark.killpoint(steps="{steps}")
def test_single(killpoint_session, killpoint_schedule):
    killpoint.expect(killpoint_session.trial(killpoint_schedule))

def test_plain():
    assert True
'''


def inner_pytest(folder: Path, dsn: str, *args: str, steps: str = BROKEN_AGENT) -> subprocess.CompletedProcess:
    return run_inner(folder, dsn, steps, *args)


@pytest.fixture
def user_suite(tmp_path: Path) -> Path:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS.format(steps=BROKEN_AGENT)))
    return tmp_path


def only_run_dir(folder: Path) -> Path:
    runs = list((folder / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def test_a_failing_trial_shows_the_cli_block_and_the_run_dir_is_complete(user_suite: Path, pg_dsn: str) -> None:
    out = inner_pytest(user_suite, pg_dsn, "-q", "-k", "email_kill")
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    run_dir = only_run_dir(user_suite)
    assert "TrialFailed" in text and "exactly_once: fail" in text, text
    assert "schedule: email:effect.applied:kill" in text, text
    assert "seed:     none (an explicit schedule, drawn from no seed)" in text, text  # no seed: it says why
    replay = (f"replay:   killpoint replay --scenario crash-points --schedule 'email:effect.applied:kill' "
              f"--steps {BROKEN_AGENT}")
    assert replay in text, text
    assert f"run dir:  {run_dir}" in text, text
    assert f"killpoint run directory: {run_dir}" in text, text  # the terminal summary names it too
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    trials = [t for r in verdicts for t in r["trials"]]
    assert [(t["schedule"], t["outcome"]) for t in trials] == [("email:effect.applied:kill", "fail")]
    assert verdicts[0]["scenario"] == "crash-points" and verdicts[0]["outcome"] == "fail"
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["steps"] == BROKEN_AGENT and meta["command"] == "pytest"


def test_single_faults_parametrize_one_test_id_each_and_the_marker_selects(user_suite: Path, pg_dsn: str) -> None:
    out = inner_pytest(user_suite, pg_dsn, "--collect-only", "-q", "-m", "killpoint")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    ids = [line.split("::", 1)[1] for line in out.stdout.splitlines() if "::" in line]
    assert "test_plain" not in ids  # not a killpoint test: deselected by -m killpoint
    assert "test_email_kill" in ids  # uses killpoint_session: marked automatically
    points = crash_free_points(BROKEN_AGENT, cache=user_suite / "cache" / "points")  # the inner run cached them
    expected = [f"test_single[{s}]" for s in exhaustive(points)]
    assert [i for i in ids if i.startswith("test_single")] == expected
    assert len(expected) == len(set(expected)) > 10
    assert "test_single[email:effect.applied:kill]" in expected


def test_a_parametrized_single_fault_fails_alone(user_suite: Path, pg_dsn: str) -> None:
    out = inner_pytest(user_suite, pg_dsn, "-q", "-k", "test_single and email")
    text = out.stdout + out.stderr
    failed = {line.split("[", 1)[1].split("]", 1)[0] for line in text.splitlines()
              if line.startswith("FAILED test_user.py::test_single[")}
    assert "email:effect.applied:kill" in failed, text  # the email sent again after a kill
    assert not any(s.startswith("email:step.start") for s in failed), text  # nothing sent yet: survived
    run_dir = only_run_dir(user_suite)
    trials = [t for r in json.loads((run_dir / "verdicts.json").read_text()) for t in r["trials"]]
    assert {t["schedule"] for t in trials if t["outcome"] == "fail"} == failed  # one test id per schedule
    assert len(trials) == len({t["schedule"] for t in trials}) > len(failed)


def test_a_scenario_runs_as_a_test(tmp_path: Path, pg_dsn: str) -> None:
    (tmp_path / "test_scn.py").write_text(textwrap.dedent('''
        import killpoint

        def test_negative_control(killpoint_scenario):
            result = killpoint_scenario("non-idempotent-downstream")
            assert result.outcome == "expected"
            killpoint.expect(result)

        def test_unknown_scenario_is_one_line(killpoint_scenario):
            killpoint_scenario("no-such-scenario")
    '''))
    out = inner_pytest(tmp_path, pg_dsn, "-q", steps="killpoint.reference_agent.invoice_agent")
    text = out.stdout + out.stderr
    assert "1 failed, 1 passed" in text, text
    assert "no scenario named 'no-such-scenario'" in text, text
    verdicts = json.loads((only_run_dir(tmp_path) / "verdicts.json").read_text())
    assert [(r["scenario"], r["outcome"]) for r in verdicts] == [("non-idempotent-downstream", "expected")]


def test_under_xdist_each_worker_writes_its_own_run_dir(user_suite: Path, pg_dsn: str) -> None:
    """Two workers on one database: each its own run directory (named after it, with verdicts), its own run
    ids (a run id both took would mix two runs' checkpoints), and together every selected test once."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed here (pip install pytest-xdist)")
    out = inner_pytest(user_suite, pg_dsn, "-q", "-n", "2", "-k", "test_single and email")
    text = out.stdout + out.stderr
    assert "FAILED test_user.py::test_single[email:effect.applied:kill]" in text, text
    runs = sorted((user_suite / "runs").iterdir())
    assert len(runs) == 2 and all((r / "verdicts.json").is_file() for r in runs), runs
    workers = [json.loads((r / "meta.json").read_text())["xdist_worker"] for r in runs]
    assert sorted(workers) == ["gw0", "gw1"] and all(r.name.endswith(f"-{w}") for r, w in zip(runs, workers, strict=True)), runs
    verdicts = {r.name: json.loads((r / "verdicts.json").read_text()) for r in runs}
    assert {sc["scenario"] for v in verdicts.values() for sc in v} == {"crash-points"}  # the worker is no scenario
    assert ("replay:   killpoint replay --scenario crash-points --schedule 'email:effect.applied:kill' "
            f"--steps {BROKEN_AGENT}") in text, text
    trials = {name: [t for sc in v for t in sc["trials"]] for name, v in verdicts.items()}
    assert all(trials.values()), trials  # both workers ran trials
    ids = [t["run_id"] for ts in trials.values() for t in ts]
    assert len(ids) == len(set(ids)), ids  # no run id taken by both workers
    schedules = [t["schedule"] for ts in trials.values() for t in ts]
    points = crash_free_points(BROKEN_AGENT, cache=user_suite / "cache" / "points")
    assert sorted(schedules) == sorted(str(s) for s in exhaustive(points) if "email" in str(s))  # each test once
    failed = {line.split("[", 1)[1].split("]", 1)[0] for line in text.splitlines()
              if line.startswith("FAILED test_user.py::test_single[")}
    assert {t["schedule"] for ts in trials.values() for t in ts if t["outcome"] == "fail"} == failed, text

