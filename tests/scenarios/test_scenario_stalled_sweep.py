"""stalled-sweep: workers of several runs die mid-run, two sweepers race, queue workers resume. On the
reference agent every stalled run gets one job, from one sweeper, taken by one worker, and completes
exactly once; a sweeper without the dedupe job id is caught."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.stalled_sweep import StalledSweep, race_sweepers
from tests.gallery.variants import sweep_no_dedupe
from tests.helpers.harness import harness_session


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("stalled-sweep"), "t_scenario_stalled_sweep") as s:
        yield s


def _why(trials: list[Trial]) -> str:
    return "\n".join(f"{t.run_id} {t.schedule}: {v.checker}: {v.reason} {v.evidence}"
                     for t in trials for v in t.verdicts if v.outcome != "pass")


def test_each_stalled_run_is_resumed_once_and_completes(session: Session) -> None:
    scenario = StalledSweep()
    ctx = Context(session=session)
    assert [str(s) for s in scenario.schedules(ctx)] == ["charge:checkpoint.committed:kill",
                                                         "charge:effect.applied:kill"]
    trials = scenario.run(ctx)
    assert len(trials) == scenario.runs * len(scenario.schedules(ctx))
    assert all(t.outcome == "pass" for t in trials), _why(trials)
    for t in trials:
        o = t.evidence.extra
        assert o["stalled"], f"{t.run_id}: the kill did not stall the run, the sweep was not exercised"
        assert o["resume_jobs"] == [f"resume-{t.run_id}"]
        assert len(o["queued_by"]) == 1 and len(o["takers"]) == 1
        assert t.evidence.final is not None and t.evidence.final["status"] == "done"
        killed = [i for i in t.evidence.incarnations if i["role"] == "worker"]
        assert [i["signal"] for i in killed] == [9], "the run's own worker was SIGKILLed at its kill point"
    assert scenario.figures(trials).startswith(f"{len(trials)} runs stalled, {len(trials)} resume jobs")


def test_a_resume_killed_again_is_swept_again_and_completes(session: Session) -> None:
    """A second kill, in the resumed run, leaves it to a following queue worker and the sweeper."""
    scenario = StalledSweep()
    ctx = Context(session=session)
    trials = scenario.round(ctx, Schedule.parse("charge:checkpoint.committed:kill,email:effect.applied:kill"))
    assert all(t.outcome == "pass" for t in trials), _why(trials)
    for t in trials:
        assert [f["step"] for f in t.evidence.faults()] == ["charge", "email"]
        assert len(t.evidence.extra["takers"]) == 1  # the race's job had one taker, killed at email
        assert len({i["inc"] for i in t.evidence.incarnations}) == 3  # its worker, the taker, the next one


class _NoDedupe(StalledSweep):
    def schedules(self, ctx: Context) -> list[Schedule]:
        return [Schedule.parse("charge:checkpoint.committed:kill")]

    def sweep(self, conn: psycopg.Connection, stale_seconds: float) -> list[str]:
        return sweep_no_dedupe.sweep(conn, stale_seconds)


def test_a_sweeper_without_the_dedupe_job_id_is_caught(session: Session) -> None:
    trials = _NoDedupe().run(Context(session=session))
    assert trials and all(t.outcome == "fail" for t in trials), _why(trials)
    for t in trials:
        assert "resumed_once" in {v.checker for v in t.failing()}
        assert len(t.evidence.extra["resume_jobs"]) == 2  # one per racing sweeper
        assert t.evidence.extra["queued_by"] == [1, 2]


def test_the_sweepers_run_at_the_same_time(session: Session) -> None:
    """Each sweeper waits inside its sweep for the other: only two sweepers running at once get through."""
    inside = threading.Barrier(2)

    def sweep(conn: psycopg.Connection, stale_seconds: float) -> list[str]:
        inside.wait(timeout=5)
        return [conn.execute("SELECT current_setting('application_name')").fetchone()[0]]

    assert sorted(race_sweepers(session.env.pg.dsn, sweep, 2, 300.0)) == [
        ["killpoint-sweeper-1"], ["killpoint-sweeper-2"]]


@pytest.fixture(scope="module")
def single(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("stalled-single"), "t_stalled_single",
                         steps="tests.gallery.quiet.single_step") as s:
        yield s


def test_an_agent_of_one_step_stalls_as_its_step_starts_and_is_swept(single: Session) -> None:
    """Killed after its only checkpoint, a run is done: the round once stalled nothing and passed, having tested
    no sweep ("0 runs stalled"). Its worker now dies as the step starts, and every run is swept and resumed."""
    scenario = StalledSweep()
    ctx = Context(session=single)
    assert [str(s) for s in scenario.schedules(ctx)] == ["tally:step.start:kill"]
    trials = scenario.run(ctx)
    assert len(trials) == scenario.runs and all(t.outcome == "pass" for t in trials), _why(trials)
    assert all(t.evidence.extra["stalled"] for t in trials)
    assert {next(v for v in t.verdicts if v.checker == "resumed_once").outcome for t in trials} == {"pass"}
    assert scenario.result(trials, 0.0).outcome == "pass"


def test_a_session_in_which_no_run_stalled_is_unknown_never_a_pass(single: Session) -> None:
    """The schedule that stalled nothing (a kill after the only checkpoint): each trial passes its checkers,
    `resumed_once` is n/a, and the scenario says no sweep was tested."""
    scenario = StalledSweep()
    trials = scenario.round(Context(session=single), Schedule.parse("tally:checkpoint.committed:kill"))
    assert all(t.outcome == "pass" and not t.evidence.extra["stalled"] for t in trials), _why(trials)
    assert {next(v for v in t.verdicts if v.checker == "resumed_once").outcome for t in trials} == {"n/a"}
    result = scenario.result(trials, 0.0)
    assert result.outcome == "unknown" and "no run stalled" in result.reason, result
