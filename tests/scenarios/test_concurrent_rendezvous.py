"""concurrent-runs on agents whose steps are named otherwise than the reference agent's (no model call,
tables of their own): a figure read in one step and written back in a later one is a lost update found
whatever the steps are called, a look-alike that adds in the checkpoint's transaction passes, and runs that
hold each other back with a lock pass after the rendezvous lets the first go on (tests/gallery/tallies)."""

from __future__ import annotations

import pytest

from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.concurrent_runs import HELD, ConcurrentRuns
from tests.helpers.checks import REPLAY, cli_args, describe, failing_checkers
from tests.helpers.sandbox import Sandbox
from tests.helpers.scenarios import failing, module_session, why

session = module_session("rendezvous")

TALLIES = "tests.gallery.tallies"


def held(trials: list[Trial]) -> dict:
    """How the concurrent set was held, as its runs' evidence records it (the same for the three)."""
    (record,) = {repr(t.evidence.extra[HELD]): t.evidence.extra[HELD] for t in trials[:3]}.values()
    assert all(HELD not in t.evidence.extra for t in trials[3:])  # the serial set is not held
    return record


def on(steps: str) -> ConcurrentRuns:
    """concurrent-runs on the tally agent `steps`."""
    scenario = ConcurrentRuns()
    scenario.steps = f"{TALLIES}.{steps}"
    return scenario


@pytest.mark.parametrize("agent", ["tally_carried", "seats_carried"])
def test_a_figure_carried_from_one_step_to_a_later_write_is_a_lost_update(session: Session, agent: str) -> None:
    scenario = on(agent)
    trials = scenario.together(Context(session=session), Schedule(), 0)
    concurrent, serial = trials[:3], trials[3:]
    assert all({"invariants_hold", "same_as_serial"} <= failing(t) for t in concurrent), why(trials)
    assert all(t.outcome == "pass" for t in serial), why(trials)  # one after another, each reads the last write
    record = held(trials)
    assert record["missing"] is None and record["together"] == list(scenario.agent(Context(session=session)).steps)


def test_a_look_alike_that_adds_in_the_checkpoint_transaction_passes(session: Session) -> None:
    scenario = on("tally_in_txn")
    trials = scenario.together(Context(session=session), Schedule(), 0)
    assert len(trials) == 6 and all(t.outcome == "pass" for t in trials), why(trials)
    assert held(trials)["together"] == ["open", "book", "close"] and held(trials)["missing"] is None


def test_runs_that_hold_each_other_back_pass_once_the_rendezvous_lets_the_first_go_on(session: Session) -> None:
    scenario = on("tally_locked")
    trials = scenario.together(Context(session=session), Schedule(), 0)
    assert len(trials) == 6 and all(t.outcome == "pass" for t in trials), why(trials)
    record = held(trials)
    assert record["together"] == ["open"] and record["missing"] is not None
    step, missing = record["missing"]
    assert step == "book" and len(missing) == 2  # the two waiting for the first one's lock
    assert "not at 'book' within 3s" in scenario.figures(trials) and "held no more" in scenario.figures(trials)


def test_the_command_line_finds_it_and_its_replay_line_reproduces_it(sandbox: Sandbox, dsn_args: list[str]) -> None:
    """`killpoint run` on an agent of steps of its own exits 1 naming the checkers, and the replay line it
    prints, run as printed, fails the same way."""
    steps = f"{TALLIES}.seats_carried"
    proc = sandbox.run("run", "--scenario", "concurrent-runs", "--steps", steps, *dsn_args, timeout=300)
    assert proc.returncode == 1, describe(proc)
    assert {"invariants_hold", "same_as_serial"} <= set(failing_checkers(proc.stdout)), describe(proc)
    assert "each of 3 steps begun together" in proc.stdout, describe(proc)
    line = REPLAY.findall(proc.stdout)[0]
    assert f"--steps {steps}" in line and "--scenario concurrent-runs" in line, line
    again = sandbox.run(*cli_args(line), *dsn_args, timeout=300)
    assert again.returncode == 1, describe(again)
    assert {"invariants_hold", "same_as_serial"} <= set(failing_checkers(again.stdout)), describe(again)
