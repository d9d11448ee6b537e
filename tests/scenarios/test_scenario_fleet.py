"""fleet: many runs, several queue workers, seeded faults across the fleet. On the reference agent every
run completes exactly once and no process outlives the fleet; an agent without idempotency keys is
caught. The fleet's own pieces (seeded schedule, fault counting) are checked on their own first."""

from __future__ import annotations

from collections.abc import Iterator

import psutil
import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.plan import FaultPlan, fleet_schedule
from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.fleet import FleetScenario
from tests.helpers.harness import harness_session

STEP_POINTS = {"plan": ["step.start", "model.request", "checkpoint.committed"],
               "charge": ["step.start", "effect.applied", "effect.responded"]}


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("fleet"), "t_scenario_fleet") as s:
        yield s


def _why(trials: list[Trial]) -> str:
    return "\n".join(f"{t.run_id}: {v.checker}: {v.reason} {v.evidence}"
                     for t in trials for v in t.verdicts if v.outcome != "pass")


def test_the_fleet_schedule_is_a_pure_function_of_the_seed() -> None:
    a = fleet_schedule(3, STEP_POINTS, runs=12, faults=6)
    assert a == fleet_schedule(3, STEP_POINTS, runs=12, faults=6)
    assert str(a) != str(fleet_schedule(4, STEP_POINTS, runs=12, faults=6))
    assert 1 <= len(a) <= 6
    assert all(1 <= f.nth <= 12 and f.action in ("kill", "term") and f.point in STEP_POINTS[f.step] for f in a)
    assert Schedule.parse(str(a)) == a  # what the report prints replays


def test_a_fleet_wide_fault_counts_every_run_and_a_per_run_fault_each_run() -> None:
    fleet = FaultPlan(Schedule.parse("charge:effect.applied:kill@2"), "fleet")
    assert [fleet.reach(r, "charge", "effect.applied")[1] is not None for r in ("r1", "r2", "r1")] == [False, True, False]
    per_run = FaultPlan(Schedule.parse("charge:effect.applied:kill"), "run")
    assert [per_run.reach(r, "charge", "effect.applied")[1] is not None for r in ("r1", "r2", "r1")] == [True, True, False]


def test_a_fleet_applies_stop_and_db_crash_through_the_shared_plan(session: Session) -> None:
    """The fleet shares the single run's fault plan and nemesis: a frozen queue worker is taken over by a
    successor of its run and thawed (and fenced); a db-crash reaches the nemesis, which says it was missed
    on a database killpoint does not own."""
    scenario = FleetScenario()
    scenario.runs = 4
    ctx = Context(session=session)
    schedule = Schedule.parse("charge:step.start:stop@2,email:checkpoint.writing:db-crash@3")
    trial = scenario.trial(ctx, schedule)
    events = session.history.events()
    fired = {(e["action"], e["point"]) for e in events if e["type"] == "fault" and e["run_id"].startswith("fleet-")}
    assert fired >= {("stop", "step.start"), ("db-crash", "checkpoint.writing")}, fired
    assert any(e["type"] == "thaw" for e in events)
    # this session's database is one of the shared test server's (not owned): the db-crash is said to be
    # missed, and the trial that met it cannot pass
    assert not session.env.pg.owned
    missed = [e for e in events if e["type"] == "fault.missed"]
    assert missed and "not owned" in missed[-1]["reason"]
    assert trial.outcome == "unknown" and [v.checker for v in trial.verdicts if v.outcome == "unknown"] == [
        "faults_injected"], _why([trial])


def test_every_run_of_the_fleet_completes_exactly_once(session: Session) -> None:
    scenario = FleetScenario()
    ctx = Context(session=session, seed=0)
    trials = scenario.run(ctx)
    assert len(trials) == scenario.runs
    assert {(str(t.schedule), t.seed) for t in trials} == {(str(scenario.schedule_from_seed(ctx, 0)), 0)}
    assert all(t.outcome == "pass" for t in trials), _why(trials)
    hit = [t for t in trials if t.evidence.faults()]
    assert len(hit) >= 3, "the seeded faults must land on several runs"
    workers = {i["inc"] for t in trials for i in t.evidence.incarnations}
    assert len(workers) > scenario.workers, "killed workers are replaced"
    assert all(len({i["inc"] for i in t.evidence.incarnations}) >= 1 for t in trials)
    for t in trials:
        assert t.evidence.final is not None and t.evidence.final["status"] == "done"
        assert {e["service"] for e in t.evidence.effects} == {"ledger", "mailer"}  # its own, under its prefix
        for inc in t.evidence.incarnations:  # nothing outlives the fleet
            assert not psutil.pid_exists(inc["pid"]) or psutil.Process(inc["pid"]).status() == psutil.STATUS_ZOMBIE
    figures = scenario.figures(trials)
    assert figures.startswith(f"{scenario.runs}/{scenario.runs} runs done, {len(trials[0].schedule)} faults")
    assert "runs/s" in figures


class _Keyless(FleetScenario):
    steps = "tests.gallery.mutants.no_key"  # the charge and the email without an idempotency key
    runs = 6


def test_an_agent_without_idempotency_keys_is_caught(session: Session) -> None:
    scenario = _Keyless()
    ctx = Context(session=session)
    trial = scenario.trial(ctx, Schedule.parse("charge:effect.applied:kill@2,email:effect.responded:kill@4"))
    assert trial.outcome == "fail"
    exactly_once = next(v for v in trial.verdicts if v.checker == "exactly_once")
    assert exactly_once.outcome == "fail" and any(line.startswith("extra") for line in exactly_once.evidence)
