"""A seed a scenario ran names the schedule `replay --seed` runs (`Scenario.schedule_from_seed`).

A random trial's failure shows its seed; a user repeats it with `killpoint replay --scenario S --seed N`. That
only works if each scenario draws its random plan exactly as its `schedule_from_seed` draws a seed's
schedule. flaky-services did not: its plan drew outages of both lengths and at most 3 faults, its replay the
sweep's actions and one fault per step, so a seed it reported replayed as another schedule.

Pure: each scenario's points and occurrences are given (the reference agent's, with a loop's later passes),
nothing is run.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from killpoint.faults.mixed import mixed_from_seed, mixed_schedules
from killpoint.faults.points import base
from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Scenario, registry
from tests.faults.test_schedule import REFERENCE_POINTS

LOOP = {"email": {"effect.received": 3, "effect.applied": 3}, "charge": {"step.start": 2}}
"""A loop's later passes: email sends three times, charge starts twice."""


def on_these_points(scenario: Scenario, occurrences: dict) -> Scenario:
    """`scenario` over the reference agent's points and `occurrences`, with no session behind it."""

    class Given(type(scenario)):  # type: ignore[misc]
        def step_points(self, ctx):  # type: ignore[no-untyped-def, override]
            return REFERENCE_POINTS

        def occurrences(self, ctx):  # type: ignore[no-untyped-def, override]
            return occurrences

    return Given()


@pytest.mark.parametrize("occurrences", [{}, LOOP], ids=["loop-free", "loop"])
@pytest.mark.parametrize("name", sorted(registry()))
def test_every_seed_of_a_random_plan_replays_as_its_schedule(name: str, occurrences: dict) -> None:
    scenario = on_these_points(registry()[name], occurrences)
    ctx = SimpleNamespace(seed=11, actions=(), random_count=12)
    plan = scenario.random_plan(ctx, 12)  # type: ignore[arg-type]
    for seed, schedule in plan:
        assert scenario.schedule_from_seed(ctx, seed) == schedule, (name, seed)  # type: ignore[arg-type]


def first_faults(schedule: Schedule) -> list:
    """Each (step, point)'s first fault in `schedule` (a later one on it takes the next occurrence)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in schedule:
        if (f.step, f.point) not in seen:
            seen.add((f.step, f.point))
            out.append(f)
    return out


def test_mixed_schedules_draw_a_loops_later_passes_and_leave_loop_free_seeds_alone() -> None:
    loop_free = mixed_schedules(7, 200, REFERENCE_POINTS)
    assert mixed_schedules(7, 200, REFERENCE_POINTS, occurrences={}) == loop_free
    looped = mixed_schedules(7, 200, REFERENCE_POINTS, occurrences=LOOP)
    firsts = [f for _, s in looped for f in first_faults(s)]
    assert {f.nth for f in firsts if (f.step, f.point) == ("email", "effect.received")} == {1, 2, 3}
    assert {f.nth for f in firsts if (f.step, f.point) == ("charge", "step.start")} == {1, 2}
    assert all(f.nth == 1 for f in firsts if f.point not in LOOP.get(f.step, {}))
    looped_points = {(s, p) for s in LOOP for p in LOOP[s]}
    for (seed, schedule), (_, before) in zip(looped, loop_free, strict=True):
        assert mixed_from_seed(seed, REFERENCE_POINTS, occurrences=LOOP) == schedule
        if not any((f.step, f.point) in looped_points for f in before):
            assert schedule == before  # no looped point drawn: the seed's schedule is the one before


def test_flaky_services_seed_replays_with_a_lasting_outage() -> None:
    """The case that was wrong: a seed whose plan drew `outage=5` replays with it."""
    scenario = on_these_points(registry()["flaky-services"], {})
    ctx = SimpleNamespace(seed=5, actions=(), random_count=40)
    plan = scenario.random_plan(ctx, 40)  # type: ignore[arg-type]
    lasting = [(seed, s) for seed, s in plan if any(f.action.startswith("outage=") for f in s)]
    assert lasting
    seed, schedule = lasting[0]
    assert scenario.schedule_from_seed(ctx, seed) == schedule  # type: ignore[arg-type]
    assert isinstance(schedule, Schedule) and len(schedule) > 1


@pytest.mark.parametrize("actions", [("kill", "error"), ("term", "drop", "outage"), ("clock",), ("outage",)])
def test_mixed_faults_injects_only_the_actions_it_is_given(actions: tuple[str, ...]) -> None:
    """`--actions kill,error` used to leave mixed-faults' random schedules (drops, outages, clock jumps,
    terms) and its pairs unfiltered."""
    scenario = on_these_points(registry()["mixed-faults"], LOOP)
    ctx = SimpleNamespace(seed=3, actions=actions, random_count=40)
    assert scenario.skip_reason(ctx) is None  # type: ignore[arg-type]
    plan = [s for _, s in scenario.random_plan(ctx, 40)] + scenario.systematic(ctx)  # type: ignore[arg-type]
    assert plan
    assert {base(f.action) for s in plan for f in s} <= set(actions)
    for seed, schedule in scenario.random_plan(ctx, 40):  # type: ignore[arg-type]
        assert scenario.schedule_from_seed(ctx, seed) == schedule  # type: ignore[arg-type]


@pytest.mark.parametrize("actions", [("kill",), ("kill", "term"), ("error", "drop")])
def test_mixed_faults_is_skipped_when_the_actions_leave_none_of_its_schedules(actions: tuple[str, ...]) -> None:
    scenario = on_these_points(registry()["mixed-faults"], {})
    ctx = SimpleNamespace(seed=3, actions=actions, random_count=40)
    assert "among --actions" in (scenario.skip_reason(ctx) or "")  # type: ignore[arg-type]
    assert scenario.systematic(ctx) == [] and scenario.random_plan(ctx, 40) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(("allowed", "expected"), [
    (("term", "kill"), {"term", "kill"}), (("kill",), {"kill"}), (("term",), {"term"}), ((), set())])
def test_schema_upgrade_pauses_only_with_the_actions_it_is_given(allowed: tuple[str, ...], expected: set) -> None:
    """`--actions kill` used to leave schema-upgrade's `term` pauses in."""
    from killpoint.scenarios.schema_upgrade import upgrade_faults

    faults = upgrade_faults({s: list(p) for s, p in REFERENCE_POINTS.items()}, allowed)
    assert {f.action for f in faults} == expected
    assert len(upgrade_faults({s: list(p) for s, p in REFERENCE_POINTS.items()})) == len(REFERENCE_POINTS) - 1 + sum(
        "effect.applied" in p for p in REFERENCE_POINTS.values())
