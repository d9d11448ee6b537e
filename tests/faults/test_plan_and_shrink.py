"""The fault plan and shrinking are pure: no Postgres, no processes."""

from __future__ import annotations

from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Schedule
from killpoint.faults.shrink import renumber, shrink


def test_a_plan_fires_each_fault_once_and_names_the_unfired() -> None:
    plan = FaultPlan(Schedule.parse("email:effect.applied:kill@2,charge:step.start:term"))
    assert plan.reach("r", "email", "effect.applied") == (1, None)
    nth, fault = plan.reach("r", "email", "effect.applied")
    assert nth == 2 and str(fault) == "email:effect.applied:kill@2"
    assert plan.reach("r", "email", "effect.applied") == (3, None)
    assert [str(f) for f in plan.unfired("r")] == ["charge:step.start:term"]


def test_shrink_finds_the_one_fault_that_fails() -> None:
    schedule = Schedule.parse("plan:step.start:kill,email:effect.applied:kill,charge:step.start:term")
    tried: list[str] = []

    def still_fails(candidate: Schedule) -> bool:
        tried.append(str(candidate))
        return any(f.step == "email" for f in candidate)

    assert str(shrink(schedule, still_fails)) == "email:effect.applied:kill"
    assert tried[0] == "email:effect.applied:kill,charge:step.start:term"  # first to last, one drop at a time


def test_shrink_keeps_a_schedule_no_smaller_one_fails() -> None:
    schedule = Schedule.parse("plan:step.start:kill,email:effect.applied:kill")
    assert shrink(schedule, lambda _s: False) == schedule


def test_shrink_stops_after_max_tries() -> None:
    schedule = Schedule.parse(",".join(f"s{i}:step.start:kill" for i in range(10)))
    calls: list[Schedule] = []
    shrink(schedule, lambda s: calls.append(s) is not None, max_tries=3)
    assert len(calls) == 3


def test_renumber_moves_an_occurrence_down_after_a_drop() -> None:
    faults = Schedule.parse("email:effect.applied:kill@2").faults
    assert [str(f) for f in renumber(faults)] == ["email:effect.applied:kill"]
