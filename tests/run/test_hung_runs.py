"""A worker that blocks past the run's time budget is reported as hung, with its stack, and never judged as if
it had finished; a crash-free run that hung is never used as a reference.

Probes: `tests/gallery/variants/hangs_on_resume.py` blocks only when its `record` step is resumed after a
kill; `tests/gallery/variants/hangs_always.py` blocks in every run. The stacks come from py-spy when it is on
PATH, else from the faulthandler the reference worker registers on SIGUSR1 (harness/env/stacks.py): both
ways are exercised on a process of their own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env import stacks
from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.options import RunOptions
from killpoint.run.trial import CrashFreeFailure, Session
from tests.helpers.harness import harness_session

BUDGET = RunOptions(grace=5.0, time_budget=15.0)
"""A budget the crash-free run needs a fraction of: running out of it is the hang, not slowness."""

BLOCKED = """
import faulthandler, signal, sys, threading
faulthandler.register(signal.SIGUSR1, all_threads=True)
def blocked_in_here():
    print("ready", flush=True)
    threading.Event().wait()
blocked_in_here()
"""


@pytest.fixture
def blocked(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A Python process blocked in `blocked_in_here`, its stderr to a log, that handles SIGUSR1."""
    log = tmp_path / "blocked.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", BLOCKED], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc, str(log)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout:
            proc.stdout.close()


def test_the_stack_comes_from_the_stack_signal_without_py_spy(blocked: tuple[subprocess.Popen[str], str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    proc, log = blocked
    monkeypatch.setattr(stacks.shutil, "which", lambda _name: None)
    lines = stacks.dump(proc.pid, log, "SIGUSR1")
    assert any("blocked_in_here" in line for line in lines), lines
    assert proc.poll() is None  # the signal dumped the stack; it did not end the process


def test_without_py_spy_or_a_stack_signal_it_says_so(blocked: tuple[subprocess.Popen[str], str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    proc, log = blocked
    monkeypatch.setattr(stacks.shutil, "which", lambda _name: None)
    assert stacks.dump(proc.pid, log, None) == [
        "no stack: py-spy is not installed (or cannot attach) and the worker registered no stack signal"]
    assert proc.poll() is None


@pytest.mark.skipif(shutil.which("py-spy") is None, reason="py-spy is not installed")
def test_the_stack_comes_from_py_spy(blocked: tuple[subprocess.Popen[str], str]) -> None:
    proc, _ = blocked
    lines = stacks.dump(proc.pid, None, None)
    assert any("blocked_in_here" in line for line in lines), lines


@pytest.fixture(scope="module")
def resume_session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("hung"), "test_hung_resume",
                         steps="tests.gallery.variants.hangs_on_resume", options=BUDGET) as s:
        yield s


def test_a_worker_that_hangs_after_a_kill_is_reported_hung_with_its_stack(resume_session: Session) -> None:
    trial = resume_session.trial(Schedule.parse("record:checkpoint.writing:kill", resume_session.agent.steps))
    assert trial.outcome == "fail", trial.verdicts
    by_name = {v.checker: v for v in trial.verdicts}
    assert by_name["completes"].outcome == "fail"
    assert by_name["completes"].reason.startswith("hung: "), by_name["completes"]
    assert "last point record:step.start" in by_name["completes"].reason
    assert any("wait_for_earlier_attempt" in line for line in by_name["completes"].evidence), by_name["completes"]
    others = [v for v in trial.verdicts if v.checker != "completes"]
    assert others and all(v.outcome == "unknown" and "hung" in v.reason for v in others), others
    (event,) = [e for e in trial.evidence.events if e["type"] == "hung"]
    assert event["inc"] == trial.evidence.incarnations[-1]["inc"]
    assert trial.evidence.incarnations[-1]["signal"] == 9  # killed at the end of the run, not left behind


def test_a_crash_free_run_that_hangs_is_no_reference(pg_server: PostgresHandle, tmp_path: Path) -> None:
    with harness_session(pg_server, tmp_path, "test_hung_always", steps="tests.gallery.variants.hangs_always",
                         options=BUDGET) as s, pytest.raises(CrashFreeFailure) as caught:
        s.baseline()
    assert "hung: " in caught.value.message
    assert any("wait_for_ack" in line for line in caught.value.details), caught.value.details
    assert not [t for t in s.trials], "no trial may be judged against a run that hung"
