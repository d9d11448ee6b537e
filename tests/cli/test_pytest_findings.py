"""pytest failures start with the finding (checker, schedule, replay line), not killpoint's source: in
`killpoint.expect`, in the docs' `assert trial.outcome == "pass", trial.failing()` style, and for a schedule
Hypothesis drew (shown as its text, its seed line saying Hypothesis drew it). The run directories go under
`.killpoint/runs` of the rootdir (pytest deletes its own temporary directories after three sessions), and
the terminal summary names them under pytest-xdist too.

One real inner pytest (a subprocess) on a tiny test file, two xdist workers, on the agent whose email has
no idempotency key (a kill after the mail went out sends it twice). Then, without pytest around it, what
a trial's `failing()` and `repr` show.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.faults.schedule import Schedule
from killpoint.run.trial import Trial
from tests.helpers import pythonpath
from tests.helpers.harness import BROKEN_AGENT

USER_TESTS = '''
import killpoint
from hypothesis import HealthCheck, given, settings
from killpoint.faults.strategies import schedules


def test_expect(killpoint_session):
    killpoint.expect(killpoint_session.trial(killpoint.Schedule.parse("email:effect.applied:kill")))


def test_assert_style(killpoint_session):
    trial = killpoint_session.trial(killpoint.Schedule.parse("email:effect.applied:kill"))
    assert trial.outcome == "pass", trial.failing()


@settings(max_examples=1, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(schedule=schedules({"email": ["effect.applied"]}, actions=("kill",), max_faults=1))
def test_drawn(killpoint_session, schedule):
    killpoint.expect(killpoint_session.trial(schedule, explicit=False))
'''

REPLAY = f"killpoint replay --scenario crash-points --schedule 'email:effect.applied:kill' --steps {BROKEN_AGENT}"


def section(text: str, test: str) -> str:
    """The failure section of `test` in pytest's output."""
    m = re.search(rf"_{{3,}} {test} _{{3,}}\n(.*?)(?=\n_{{3,}} |\n={{3,}} )", text, re.S)
    assert m is not None, text
    return m.group(1)


def first_error_line(part: str) -> str:
    return next(line for line in part.splitlines() if line.startswith("E "))


def test_pytest_failures_start_with_the_finding(tmp_path: Path, pg_dsn: str) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is not installed here (pip install pytest-xdist)")
    pytest.importorskip("hypothesis", reason="hypothesis is not installed here")
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    env = {**os.environ, "PYTHONPATH": pythonpath(), "KILLPOINT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", str(tmp_path),
           f"--killpoint-dsn={pg_dsn}", f"--killpoint-steps={BROKEN_AGENT}", "-n", "2", "test_user.py"]
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 1 and "3 failed" in text, text

    expect = section(text, "test_expect")
    assert re.match(r"E\s+killpoint\.testing\.TrialFailed: --- FAILED: crash-points run", first_error_line(expect)), expect
    assert "def expect(" not in expect and "raise TrialFailed" not in expect, expect  # no killpoint source
    assert "exactly_once: fail" in expect and REPLAY in expect, expect

    asserted = section(text, "test_assert_style")
    assert re.search(r"AssertionError: FAIL: crash-points run run-\d+\.gw\d: exactly_once", asserted), asserted
    assert f"replay: {REPLAY}" in asserted, asserted  # whole: pytest cuts a long repr in its middle
    assert "Verdict(" not in asserted, asserted

    drawn = section(text, "test_drawn")
    assert "schedule=Schedule.parse('email:effect.applied:kill')" in drawn, drawn  # Hypothesis' falsifying example
    assert "number(" not in drawn, drawn
    assert "seed:     none (drawn by Hypothesis" in drawn, drawn
    assert "an explicit schedule" not in drawn, drawn

    runs = sorted((tmp_path / ".killpoint" / "runs").iterdir())  # not pytest's temporary directory
    assert runs and all(r.name.split("-pytest-")[1] for r in runs), runs
    summary = sorted(line for line in text.splitlines() if line.startswith("killpoint run directory: "))
    assert summary == sorted(f"killpoint run directory: {r} (killpoint report {r})" for r in runs), text


def dup(run_id: str = "crash-points-3") -> Trial:
    verdicts = [Verdict("completes", "pass", "ok"),
                Verdict("exactly_once", "fail", "effects done twice", ("extra x1: mailer key=None {}",))]
    t = Trial(run_id, Schedule.parse("email:effect.applied:kill"), None, Evidence(run_id), verdicts)
    t.steps = "my.steps"
    return t


def test_failing_is_a_list_whose_repr_is_the_finding() -> None:
    import killpoint.testing  # noqa: F401  (the plugin's session fixture imports it: it sets Failing.shown_by)

    failing = dup().failing()
    assert [v.checker for v in failing] == ["exactly_once"] and failing == [dup().verdicts[1]]
    assert repr(failing) == ("FAIL: crash-points run crash-points-3: exactly_once\n"
                             "  replay: killpoint replay --scenario crash-points --schedule 'email:effect.applied:kill'"
                             " --steps my.steps")
    assert repr(dup()) == "Trial(crash-points-3 email:effect.applied:kill: fail, exactly_once)"
    passed = Trial("run-1", Schedule(), None, Evidence("run-1"), [Verdict("completes", "pass", "ok")])
    assert repr(passed.failing()) == "[]" and repr(passed) == "Trial(run-1 crash-free: pass)"
