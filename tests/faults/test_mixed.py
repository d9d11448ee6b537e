"""Mixed schedules (harness/faults/mixed.py): service faults and process faults in one schedule, bounded by a
budget, deterministic, and shrinkable like any other schedule. Pure: no Postgres, no process."""

from __future__ import annotations

from killpoint.faults.mixed import (
    PROCESS_MIX,
    SERVICE_ACTIONS,
    fault_budget,
    mixed_from_seed,
    mixed_schedules,
    pairs,
)
from killpoint.faults.schedule import Schedule
from killpoint.faults.shrink import shrink
from tests.faults.test_schedule import REFERENCE_POINTS

STEP_POINTS = REFERENCE_POINTS  # the reference agent's kill points, written out once (test_schedule.py)


def test_the_budget_is_one_fault_per_step() -> None:
    assert fault_budget(STEP_POINTS) == 5
    assert fault_budget({"only": ["step.start"]}) == 2


def test_each_service_error_is_paired_with_a_kill_after_it() -> None:
    plan = [str(s) for s in pairs(STEP_POINTS)]
    assert "email:effect.received:error,record:step.start:kill" in plan
    assert "charge:effect.received:error,charge:checkpoint.committed:kill" in plan
    assert "plan:model.request:error,validate:step.start:kill" in plan
    assert "email:effect.applied:error,record:step.start:kill" in plan  # the ambiguous failure, then a kill
    assert len(plan) == 12  # 6 service points in 4 steps (email, charge: received and applied), 2 kills after each
    assert all(len(Schedule.parse(s, STEP_POINTS)) == 2 for s in plan)


def test_random_mixed_schedules_hold_both_kinds_within_the_budget_and_replay_from_their_seed() -> None:
    drawn = mixed_schedules(7, 200, STEP_POINTS)
    lengths = {len(s) for _, s in drawn}
    assert min(lengths) == 2 and max(lengths) == fault_budget(STEP_POINTS)  # more than the old constant 3
    for seed, schedule in drawn:
        actions = {f.action for f in schedule}
        assert actions & set(SERVICE_ACTIONS) and actions & set(PROCESS_MIX), schedule
        assert Schedule.parse(str(schedule), STEP_POINTS) == schedule  # prints and parses back
        assert mixed_from_seed(seed, STEP_POINTS) == schedule  # the seed alone replays it
    assert mixed_schedules(7, 200, STEP_POINTS) == drawn
    assert mixed_from_seed(1, STEP_POINTS, budget=3) != Schedule() and len(mixed_from_seed(1, STEP_POINTS, 2)) == 2


def test_a_mixed_schedule_shrinks_to_the_two_faults_that_matter() -> None:
    needed = {("email", "effect.received", "error"), ("record", "step.start", "kill")}
    big = Schedule.parse("plan:step.start:term,email:effect.received:error,email:effect.applied:drop,"
                         "record:step.start:kill,record:checkpoint.writing:kill", STEP_POINTS)

    def still_fails(s: Schedule) -> bool:
        return needed <= {(f.step, f.point, f.action) for f in s}

    assert str(shrink(big, still_fails)) == "email:effect.received:error,record:step.start:kill"


def test_crash_points_random_search_draws_up_to_one_fault_per_step_not_three() -> None:
    """issue 17: the random part of every scenario is bounded by the agent's fault budget, not a constant 3."""
    from types import SimpleNamespace

    from killpoint.scenarios.crash_points import CrashPoints

    class OnThesePoints(CrashPoints):
        def step_points(self, ctx):  # type: ignore[no-untyped-def, override]
            return STEP_POINTS

        def occurrences(self, ctx):  # type: ignore[no-untyped-def, override]
            return {}  # each point reached once

    ctx = SimpleNamespace(seed=11, actions=())
    scenario = OnThesePoints()
    plan = scenario.random_plan(ctx, 60)  # type: ignore[arg-type]
    sizes = {len(s) for _, s in plan}
    assert max(sizes) == fault_budget(STEP_POINTS) == 5 and min(sizes) == 1
    assert all(str(scenario.schedule_from_seed(ctx, seed)) == str(s) for seed, s in plan)  # type: ignore[arg-type]
