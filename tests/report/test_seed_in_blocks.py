"""Every printed failure block carries the seed, or says the schedule was explicit (drawn from no seed), and,
for `run` and `explore`, the run's base seed: in the CLI's text, in JUnit, and in the pytest assertion."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.cli.commands import finish
from killpoint.cli.config import Invocation
from killpoint.faults.schedule import Schedule
from killpoint.report.text import trial_block
from killpoint.run.config import SessionConfig
from killpoint.run.options import RunOptions
from killpoint.run.scenario import ScenarioResult
from killpoint.run.trial import Trial
from killpoint.testing import TrialFailed, expect

DUP = [Verdict("exactly_once", "fail", "mailer effect applied twice", ("extra x1: mailer key r:email",))]
UNSURE = [Verdict("completes", "unknown", "the run did not end in time")]


def trial(run_id: str, schedule: str, seed: int | None, verdicts: list[Verdict] = DUP) -> Trial:
    return Trial(run_id, Schedule.parse(schedule), seed, Evidence(run_id), verdicts)


def results() -> list[ScenarioResult]:
    return [ScenarioResult("crash-points", "fail", [trial("crash-points-1", "email:effect.applied:kill", None),
                                                    trial("crash-points-2", "charge:step.start:kill,email:effect.applied:kill", 9)], 1.0),
            ScenarioResult("zombie-worker", "unknown", [trial("zombie-worker-1", "plan:step.start:stop", None, UNSURE)], 1.0)]


def blocks(text: str) -> list[str]:
    return [b for b in re.split(r"\n(?=--- )", text) if b.startswith("--- ")]


def test_the_seed_line_says_the_seed_or_that_the_schedule_was_explicit() -> None:
    seeded = "\n".join(trial_block("crash-points", trial("crash-points-2", "email:effect.applied:kill", 9), "s"))
    assert "  seed:     9\n" in seeded
    explicit = "\n".join(trial_block("crash-points", trial("crash-points-1", "email:effect.applied:kill", None), "s"))
    assert "  seed:     none (an explicit schedule, drawn from no seed)\n" in explicit
    based = "\n".join(trial_block("crash-points", trial("crash-points-1", "email:effect.applied:kill", None), "s",
                                  base_seed=42))
    assert "  seed:     none (an explicit schedule, drawn from no seed); base seed of the run 42 (--seed 42 repeats it)" \
        in based


def test_an_empty_schedule_says_no_fault_was_injected_not_that_the_run_was_crash_free() -> None:
    """stored-checkpoints judges a resume of a kept checkpoint with no fault: its block must not call that
    run crash-free (it started from an older version's checkpoint, named by its seed)."""
    block = "\n".join(trial_block("stored-checkpoints", trial("stored-checkpoints-1", "", 3), "s"))
    assert "  schedule: (none: no fault injected)\n" in block
    assert "crash-free" not in block
    assert "killpoint replay --scenario stored-checkpoints --seed 3" in block


@pytest.mark.parametrize("command", ["run", "explore"])
def test_every_cli_failure_block_and_junit_case_carries_the_base_seed(command: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    session = SimpleNamespace(agent=SimpleNamespace(module="my.steps", digest="abc"), options=RunOptions(), skip_checkers=frozenset(),
                              env=SimpleNamespace(run_dir=tmp_path, worker_cmd=None, adapter=SimpleNamespace(name="checkpoints")))
    inv = Invocation(SessionConfig("my.steps", tmp_path), junit=str(tmp_path / "junit.xml"), quiet=True)
    code = finish(inv, session, results(), {"command": command, "seed": 42})  # type: ignore[arg-type]
    assert code == 1
    shown = blocks(capsys.readouterr().out)
    assert len(shown) == 2, shown  # the two crash-points trials share one cause: one block, the other counted
    assert "  also at 1 schedule in scenario crash-points (1)" in shown[0], shown[0]
    for block in shown:
        assert re.search(r"^  seed:     (\d+|none \(an explicit schedule, drawn from no seed\)); base seed of the run 42 "
                         r"\(--seed 42 repeats it\)$", block, re.M), block
    cases = [c for c in ET.parse(tmp_path / "junit.xml").iter("testcase") if len(c)]
    assert len(cases) == 3 and all("base seed of the run 42" in (c[0].text or "") for c in cases)


def test_a_replay_block_carries_the_trials_seed_and_no_base_seed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    session = SimpleNamespace(agent=SimpleNamespace(module="my.steps", digest="abc"), options=RunOptions(), skip_checkers=frozenset(),
                              env=SimpleNamespace(run_dir=tmp_path, worker_cmd=None, adapter=SimpleNamespace(name="checkpoints")))
    inv = Invocation(SessionConfig("my.steps", tmp_path), quiet=True)
    result = ScenarioResult("crash-points", "fail", [trial("crash-points-1", "email:effect.applied:kill", 9)], 1.0)
    finish(inv, session, [result], {"command": "replay", "seed": 9})  # type: ignore[arg-type]
    (block,) = blocks(capsys.readouterr().out)
    assert "\n  seed:     9\n" in block, block  # a replay's seed names the trial; it is no base seed


def test_the_pytest_assertion_block_carries_the_seed_or_says_explicit() -> None:
    for t, line in [(trial("run-1", "email:effect.applied:kill", None), "none (an explicit schedule, drawn from no seed)"),
                    (trial("crash-points-3", "email:effect.applied:kill", 5), "5")]:
        with pytest.raises(TrialFailed) as info:
            expect(t)
        assert f"  seed:     {line}" in info.value.lines, info.value.lines
