"""A schedule is judged once per session: `run`'s random part draws none its exhaustive sweep ran, and a
random exploration draws no schedule twice (`faults.schedule.distinct`).

A trial of these scenarios is a function of its schedule, so a repeat tests nothing the first trial did not;
before, a `run`'s eight random schedules per scenario held single faults the sweep had just run about one
draw in five, and a 1,000-schedule exploration of crash-points ran ~16 % of its schedules twice or more.

On an agent of other step names, its own table and no model calls (`tests.gallery.tallies.tally_in_txn`),
through the session a CLI builds, read from the lines the scenario says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule, derive_seed, fault_budget
from killpoint.run.context import Context
from killpoint.run.scenario import find
from killpoint.run.trial import Session
from tests.helpers.harness import harness_session

TALLY = "tests.gallery.tallies.tally_in_txn"
SEED = 2
"""A base seed whose first eight draws hold single faults of the sweep and whose first thirty hold repeats
(both asserted below, so the tests keep their teeth if the agent's points change)."""

SWEPT = re.compile(r"^crash-points: \[\d+/\d+\] (\S+) -> ")
DRAWN = re.compile(r"^crash-points: random \[\d+/\d+\] seed (\d+) (\S+) -> ")


@pytest.fixture(scope="module")
def tally(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("tally"), "t_once_tally", steps=TALLY) as s:
        yield s


def said(session: Session, seed: int, random: int | None) -> list[str]:
    """The lines crash-points says in `run` (random None) or in `explore --random N`."""
    lines: list[str] = []
    ctx = Context(session=session, seed=seed, random_count=8, named=("crash-points",), say=lines.append)
    scenario = find("crash-points")
    trials = scenario.run(ctx) if random is None else scenario.random(ctx, random)
    assert trials and all(t.outcome == "pass" for t in trials), [t.outcome for t in trials]
    return lines


def first_draws(session: Session, n: int) -> list[Schedule]:
    """The schedules of the first `n` seeds of `SEED`, repeats and all (the plan before `distinct`)."""
    scenario, ctx = find("crash-points"), Context(session=session, seed=SEED)
    points = scenario.step_points(ctx)
    return [Schedule.from_seed(derive_seed(SEED, i), points, actions=("kill", "term"), max_faults=fault_budget(points),
                               occurrences=scenario.occurrences(ctx)) for i in range(n)]


def drawn(lines: list[str]) -> list[tuple[int, Schedule]]:
    return [(int(m[1]), Schedule.parse(m[2])) for line in lines if (m := DRAWN.match(line))]


def test_a_runs_random_schedules_are_none_of_its_sweep_and_differ(tally: Session) -> None:
    lines = said(tally, SEED, None)
    swept = [Schedule.parse(m[1]) for line in lines if (m := SWEPT.match(line))]
    random = drawn(lines)
    assert swept and len(set(swept)) == len(swept)
    assert len(random) == 8, lines
    assert not {s for _, s in random} & set(swept)
    assert len({s for _, s in random}) == len(random)
    # each printed seed still replays as its schedule
    scenario, ctx = find("crash-points"), Context(session=tally, seed=SEED)
    assert all(scenario.schedule_from_seed(ctx, seed) == s for seed, s in random)
    # the first eight seeds of this base seed drew schedules the sweep ran: what used to run twice
    assert set(first_draws(tally, 8)) & set(swept)


def test_a_random_exploration_never_draws_a_schedule_twice(tally: Session) -> None:
    random = drawn(said(tally, SEED, 30))
    assert len(random) == 30
    assert len({s for _, s in random}) == 30
    order = [derive_seed(SEED, i) for i in range(400)]
    places = [order.index(seed) for seed, _ in random]
    assert places == sorted(places)  # in the order the seeds are drawn: the plan is the same on every machine
    before = first_draws(tally, 30)
    assert len(set(before)) < 30  # the first thirty seeds drew repeats: what used to run twice
