"""Random plans draw each schedule once (`faults.schedule.distinct`), and a small space says it ran out.

Pure: points are given (an agent of other step names), nothing is run but the plan's arithmetic. The
session-level check (a real run's lines) is tests/run/test_each_schedule_once.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from killpoint.faults.schedule import DRAWS_WITHOUT_NEW, Fault, Schedule, derive_seed, distinct
from killpoint.run import scenario as scenario_module
from killpoint.run.scenario import Scenario, registry

POINTS = {"fetch": ["step.start", "checkpoint.committed"], "notify": ["effect.received", "effect.applied"]}
"""Two steps of four points: few enough candidates that the first 40 seeds of a base seed draw repeats."""

ONE_POINT = {"only": ["step.start"]}

ONCE = sorted(name for name, sc in registry().items() if sc.judged_once)
AGAIN = sorted(name for name, sc in registry().items() if not sc.judged_once)
"""Scenarios whose seed or plan item varies a trial beyond its schedule: their plans keep repeats."""


def on_these_points(scenario: Scenario, points: dict) -> Scenario:
    class Given(type(scenario)):  # type: ignore[misc]
        def step_points(self, ctx):  # type: ignore[no-untyped-def, override]
            return points

        def occurrences(self, ctx):  # type: ignore[no-untyped-def, override]
            return {}

    return Given()


def ctx(seed: int = 1, actions: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(seed=seed, actions=actions, random_count=8)


def test_distinct_keeps_the_first_seed_of_each_schedule_in_draw_order() -> None:
    kinds = [Schedule((Fault("a", "step.start", "kill", 1),)), Schedule((Fault("a", "step.start", "term", 1),))]
    order = [derive_seed(9, i) for i in range(200)]

    def draw(seed: int) -> Schedule:
        return kinds[order.index(seed) % 3 % 2]  # seeds 0, 1, 2 -> kinds 0, 1, 0

    plan = distinct(9, 5, draw)
    assert plan == [(order[0], kinds[0]), (order[1], kinds[1])]  # fewer than asked: the space is two
    assert distinct(9, 5, draw, besides=[kinds[0]]) == [(order[1], kinds[1])]
    assert distinct(9, 5, draw, keep=lambda s: s.faults[0].action == "kill") == [(order[0], kinds[0])]
    assert distinct(9, 1, draw) == [(order[0], kinds[0])]


def test_distinct_gives_up_after_a_run_of_draws_with_nothing_new() -> None:
    drawn: list[int] = []

    def draw(seed: int) -> Schedule:
        drawn.append(seed)
        return Schedule()

    assert distinct(4, 100_000, draw) == [(derive_seed(4, 0), Schedule())]
    assert len(drawn) == 1 + DRAWS_WITHOUT_NEW  # not the 400,064 the count allows


def test_the_scenarios_that_keep_repeats_are_those_a_seed_or_an_item_varies() -> None:
    assert AGAIN == ["concurrent-runs", "deploy-drain", "fleet", "rollback-refusal", "stored-checkpoints"]


@pytest.mark.parametrize("name", AGAIN)
def test_a_scenario_whose_seed_varies_its_trial_keeps_a_trial_per_seed(name: str) -> None:
    """rollback-refusal's seed picks the kind of checkpoint: `explore --random 5` is five trials, one
    schedule or not."""
    scenario = on_these_points(registry()[name], POINTS)
    plan = scenario.random_plan(ctx(), 5)  # type: ignore[arg-type]
    assert [seed for seed, _ in plan] == [derive_seed(1, i) for i in range(5)]


@pytest.mark.parametrize("name", ONCE)
def test_no_random_plan_holds_a_schedule_twice(name: str) -> None:
    scenario = on_these_points(registry()[name], POINTS)
    plan = scenario.random_plan(ctx(), 40)  # type: ignore[arg-type]
    schedules = [s for _, s in plan]
    assert len(set(schedules)) == len(schedules)
    for seed, schedule in plan:
        assert scenario.schedule_from_seed(ctx(), seed) == schedule  # type: ignore[arg-type]
    # the same seeds drawn one by one, as before, repeat a schedule within the first forty
    if schedules:
        first = [scenario.schedule_from_seed(ctx(), derive_seed(1, i)) for i in range(40)]  # type: ignore[arg-type]
        assert len(set(first)) < 40


@pytest.mark.parametrize("name", ["crash-points", "zombie-worker", "flaky-services"])
def test_a_run_draws_no_schedule_its_sweep_ran(name: str) -> None:
    scenario = on_these_points(registry()[name], POINTS)
    swept = scenario.sweep_plan(ctx())  # type: ignore[arg-type]
    plan = scenario.random_plan(ctx(), 40, swept)  # type: ignore[arg-type]
    assert swept and plan
    assert not {s for _, s in plan} & set(swept)


def test_a_small_space_runs_what_it_has_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """One step of one point, kills only: the sweep's one schedule and one of two kills are all there is."""
    planned: list[list] = []
    monkeypatch.setattr(scenario_module, "run_plan",
                        lambda _sc, _ctx, plan, _line, _stop=False: planned.append(plan) or plan)
    lines: list[str] = []
    scenario = on_these_points(registry()["crash-points"], ONE_POINT)
    c = SimpleNamespace(seed=1, actions=("kill",), random_count=8, say=lines.append)
    swept = scenario.sweep_plan(c)  # type: ignore[arg-type]
    assert [str(s) for s in swept] == ["only:step.start:kill"]
    scenario.random(c, 10, besides=swept)  # type: ignore[arg-type]
    assert [str(s) for _, s in planned[0]] == ["only:step.start:kill,only:step.start:kill@2"]
    note = ("random: 1 of 10 schedules: the agent's fault points give no more that differ from each other and "
            "from the sweep (a schedule is judged once)")
    assert lines == [f"crash-points: {note}"]
    assert scenario.budget_cuts == (note,)  # the summary line's [...], verdicts.json's and JUnit's cut
