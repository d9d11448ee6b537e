"""Schedules: seeds are stable (golden values), text round-trips, enumeration counts, and a bad schedule
is one line naming the bad token and the valid choices, from the function and from the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from killpoint.checkers.evidence import Evidence
from killpoint.events import Point
from killpoint.faults.points import ACTIONS, POINTS, fits
from killpoint.faults.schedule import (
    MAX_OCCURRENCES,
    Fault,
    Schedule,
    ScheduleError,
    derive_seed,
    exhaustive,
    random_schedules,
)
from killpoint.run.trial import point_occurrences, step_points
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

# The reference invoice agent's kill points, as a crash-free run reaches them (written out, so that a change
# of the agent does not silently change the golden values below).
REFERENCE_POINTS: dict[str, list[str]] = {
    "plan": ["step.start", "model.request", "checkpoint.writing", "checkpoint.committed"],
    "validate": ["step.start", "model.request", "checkpoint.writing", "checkpoint.committed"],
    "charge": ["step.start", "effect.received", "effect.applied", "effect.responded", "checkpoint.writing",
               "checkpoint.committed"],
    "email": ["step.start", "effect.received", "effect.applied", "effect.responded", "checkpoint.writing",
              "checkpoint.committed"],
    "record": ["step.start", "checkpoint.writing", "checkpoint.committed"],
}
STEPS = list(REFERENCE_POINTS)


# ---- from_seed is a pure, stable function of the seed --------------------------------------------------

GOLDEN = {
    0: "charge:step.start:kill",
    1: "validate:step.start:term,record:checkpoint.committed:term",
    2: "charge:effect.responded:kill,email:effect.responded:kill,record:checkpoint.writing:term",
    3: "charge:checkpoint.writing:kill,plan:checkpoint.writing:term",
    42: "charge:effect.responded:kill",
    2**40: "email:effect.applied:term",
}


@pytest.mark.parametrize("seed", sorted(GOLDEN))
def test_from_seed_golden(seed: int) -> None:
    assert str(Schedule.from_seed(seed, REFERENCE_POINTS)) == GOLDEN[seed]


def test_from_seed_golden_all_actions() -> None:
    got = {seed: str(Schedule.from_seed(seed, REFERENCE_POINTS, actions=ACTIONS, max_faults=5)) for seed in (0, 7)}
    assert got == {  # drawn anew when error and overload came to fit effect.applied (issue 25)
        0: "charge:effect.responded:db-crash,charge:effect.responded:stop@2,plan:model.request:error,"
           "charge:effect.received:slow",
        7: "plan:checkpoint.committed:kill",
    }


def test_derived_seeds_and_random_schedules_golden() -> None:
    assert derive_seed(0, 0) == 189606541285482
    assert derive_seed(5, 7) == 144730846109342
    got = [(seed, str(s)) for seed, s in random_schedules(0, 3, REFERENCE_POINTS)]
    assert got == [
        (189606541285482, "email:effect.applied:kill,charge:checkpoint.writing:kill,record:step.start:term"),
        (262866211575819, "plan:step.start:kill"),
        (161802857768650, "email:checkpoint.writing:term"),
    ]
    # each random schedule is the one its own seed gives: a reported seed replays
    for seed, schedule in random_schedules(0, 3, REFERENCE_POINTS):
        assert Schedule.from_seed(seed, REFERENCE_POINTS) == schedule


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**64), max_faults=st.integers(min_value=1, max_value=6))
def test_from_seed_is_valid_and_prints_parseably(seed: int, max_faults: int) -> None:
    schedule = Schedule.from_seed(seed, REFERENCE_POINTS, actions=ACTIONS, max_faults=max_faults)
    assert 1 <= len(schedule) <= max_faults
    assert schedule == Schedule.from_seed(seed, REFERENCE_POINTS, actions=ACTIONS, max_faults=max_faults)
    for f in schedule:
        assert f.point in REFERENCE_POINTS[f.step] and fits(f.action, f.point)
    assert Schedule.parse(str(schedule), STEPS) == schedule


def test_from_seed_with_nothing_to_fault_is_crash_free() -> None:
    assert Schedule.from_seed(3, {"plan": ["step.start"]}, actions=("drop",)) == Schedule()


# ---- printing and parsing ------------------------------------------------------------------------------

STEP_NAMES = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=12)  # every kind of character a step name may hold
POINT_ACTIONS = [(p, a) for p in POINTS for a in ACTIONS if fits(a, p)]
FAULTS = st.builds(lambda step, pa, nth: Fault(step, *pa, nth),
                   STEP_NAMES, st.sampled_from(POINT_ACTIONS), st.integers(min_value=1, max_value=9))
SCHEDULES = st.lists(FAULTS, max_size=6, unique_by=lambda f: (f.step, f.point, f.nth)).map(lambda fs: Schedule(tuple(fs)))


@settings(max_examples=60, deadline=None)  # the grammar is small: 60 schedules of up to 6 faults cover it
@given(schedule=SCHEDULES)
def test_print_parse_round_trip(schedule: Schedule) -> None:
    text = str(schedule)
    assert str(Schedule.parse(text)) == text
    assert Schedule.parse(text) == schedule
    steps = {f.step for f in schedule}
    assert Schedule.parse(text, steps) == schedule
    spaced = " , ".join(f" {f} " for f in schedule)  # whitespace around tokens is not part of a fault
    assert str(Schedule.parse(spaced)) == text


def test_at_one_is_the_default_occurrence() -> None:
    assert str(Schedule.parse("email:effect.applied:kill@1")) == "email:effect.applied:kill"
    assert Schedule.parse("email:effect.applied:kill@3").faults[0].nth == 3


# ---- exhaustive enumeration ----------------------------------------------------------------------------

def test_exhaustive_counts() -> None:
    pairs = sum(len(p) for p in REFERENCE_POINTS.values())
    assert pairs == 23
    assert len(exhaustive(REFERENCE_POINTS, ("kill",))) == 23
    assert len(exhaustive(REFERENCE_POINTS)) == 46  # kill and term, the CLI's explore --exhaustive
    # every action where it fits: 4 process actions everywhere, drop at the 2 effect.applied, error at the 2
    # effect.received + 2 effect.applied + 2 model.request, slow at the 2 effect.received + 2 model.request,
    # overload at the 2 effect.applied + 2 model.request
    assert len(exhaustive(REFERENCE_POINTS, ACTIONS)) == 23 * 4 + 2 + 6 + 4 + 4


def test_exhaustive_is_single_distinct_fitting_faults_in_step_order() -> None:
    schedules = exhaustive(REFERENCE_POINTS, ACTIONS)
    assert all(len(s) == 1 for s in schedules)
    faults = [s.faults[0] for s in schedules]
    assert len(set(faults)) == len(faults)
    assert all(fits(f.action, f.point) and f.nth == 1 for f in faults)
    assert [f.step for f in faults] == sorted((f.step for f in faults), key=STEPS.index)
    assert exhaustive(REFERENCE_POINTS, ("kill", "term"))[:2] == [Schedule.parse("plan:step.start:kill"),
                                                                  Schedule.parse("plan:step.start:term")]


def test_exhaustive_faults_every_occurrence_a_crash_free_run_reached_up_to_the_cap() -> None:
    """A point a step reached several times (a loop's passes, a second email in the step) is faulted at each
    occurrence, right after the first, up to MAX_OCCURRENCES; without occurrences the sweep is unchanged."""
    points = {"plan": ["step.start"], "remind": ["step.start", "effect.applied"]}
    plain = [str(s) for s in exhaustive(points, ("kill",))]
    assert plain == ["plan:step.start:kill", "remind:step.start:kill", "remind:effect.applied:kill"]
    swept = [str(s) for s in exhaustive(points, ("kill", "term"), {"remind": {"effect.applied": 3}})]
    assert swept == ["plan:step.start:kill", "plan:step.start:term", "remind:step.start:kill",
                     "remind:step.start:term", "remind:effect.applied:kill", "remind:effect.applied:term",
                     "remind:effect.applied:kill@2", "remind:effect.applied:term@2", "remind:effect.applied:kill@3",
                     "remind:effect.applied:term@3"]
    many = exhaustive(points, ("kill",), {"remind": {"effect.applied": MAX_OCCURRENCES + 40}})
    assert [s.faults[0].nth for s in many if s.faults[0].point == "effect.applied"] == \
        list(range(1, MAX_OCCURRENCES + 1))


def test_a_seed_draws_which_pass_of_a_loop_it_faults_and_nothing_more_where_points_are_reached_once() -> None:
    """Random schedules fault a loop's later passes too (`occurrences`), each seed the same schedule every
    time; where every point is reached once, a seed draws the schedule it drew before occurrences existed."""
    loop = {"plan": ["step.start"], "remind": ["step.start", "effect.applied"]}
    times = {"remind": {"step.start": 3, "effect.applied": 3}}
    drawn = [s for _, s in random_schedules(7, 300, loop, occurrences=times)]
    assert drawn == [s for _, s in random_schedules(7, 300, loop, occurrences=times)]
    firsts = {f.nth for s in drawn for f in s.faults[:1] if f.step == "remind"}
    assert firsts == {1, 2, 3}
    assert [s for _, s in random_schedules(7, 300, REFERENCE_POINTS, occurrences={})] == \
        [s for _, s in random_schedules(7, 300, REFERENCE_POINTS)]
    once = {"remind": {"step.start": 1}}  # a count of 1 draws nothing more either
    assert [s for _, s in random_schedules(7, 50, loop, occurrences=once)] == \
        [s for _, s in random_schedules(7, 50, loop)]


def test_point_occurrences_counts_only_what_a_step_reached_more_than_once() -> None:
    events = [Point(run_id="r", inc="i1", step=step, point=point) for step, point in (
        ("plan", "step.start"), ("remind", "step.start"), ("remind", "effect.applied"), ("remind", "step.start"),
        ("remind", "effect.applied"), ("remind", "effect.applied"), ("close", "step.start"))]
    base = Evidence(run_id="r", events=events)
    assert point_occurrences(base) == {"remind": {"step.start": 2, "effect.applied": 3}}
    assert step_points(base) == {"plan": ["step.start"], "remind": ["step.start", "effect.applied"],
                                 "close": ["step.start"]}


# ---- bad schedules: the bad token and the valid choices -------------------------------------------------

BAD = [
    ("emial:effect.applied:kill", "emial", "charge, email, plan, record, validate"),
    ("email:effect_applied:kill", "effect_applied", ", ".join(POINTS)),
    ("email:effect.applied:KILL", "KILL", ", ".join(ACTIONS)),
    ("email:effect.applied:explode", "explode", ", ".join(ACTIONS)),
    ("email:step.start:drop", "drop", "effect.applied"),
    ("email:effect.applied:kill@0", "@0", "whole number from 1"),
    ("email:effect.applied:kill@x", "@x", "whole number from 1"),
    ("email:effect.applied:kill@²", "@²", "whole number from 1"),
    ("email:kill", "email:kill", "STEP:POINT:ACTION"),
    ("email:effect.applied:kill,email:effect.applied:term", "email:effect.applied:term", "different @N"),
]


@pytest.mark.parametrize(("text", "bad", "choices"), BAD)
def test_bad_schedule_names_token_and_choices(text: str, bad: str, choices: str) -> None:
    with pytest.raises(ScheduleError) as info:
        Schedule.parse(text, STEPS)
    line = info.value.line()
    assert "\n" not in line and info.value.exit_code == 2
    assert bad in line and choices in line, line


@pytest.mark.parametrize(("text", "bad", "choices"), [("emial:effect.applied:kill", "emial", "email, plan"),
                                                     BAD[1], BAD[3], BAD[6]])
def test_cli_bad_schedule_exits_2_with_one_line(sandbox: Sandbox, text: str, bad: str, choices: str) -> None:
    # a light step module (steps plan and email): the schedule is refused before anything starts
    proc = sandbox.run("replay", "--scenario", "crash-points", "--schedule", text,
                       "--steps", "tests.gallery.variants.tiny_agent", "--out", str(sandbox.out))
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, describe(proc)
    assert lines[0].startswith("killpoint: error[bad-schedule]") and bad in lines[0] and choices in lines[0]
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_cli_unknown_scenario_lists_known_ones(sandbox: Sandbox) -> None:
    for args in (("replay", "--scenario", "crash-pionts", "--schedule", "plan:step.start:kill"),
                 ("run", "--scenario", "crash-pionts")):
        proc = sandbox.run(*args, "--out", str(sandbox.out))
        assert proc.returncode == 2, describe(proc)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, describe(proc)
        assert "'crash-pionts'" in lines[0] and "crash-points" in lines[0].split("Fix:")[1]
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
    assert not Path(sandbox.out).exists() or not any(Path(sandbox.out).iterdir())
