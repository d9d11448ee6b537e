"""`--shard K/N` partitions the schedules of a run: the shards' union is the whole set and no schedule is in
two; a scenario's schedules spread over the shards; a bad K/N is one line, exit 2."""

from __future__ import annotations

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.errors import UsageError
from killpoint.faults.schedule import Schedule, exhaustive, random_schedules
from killpoint.faults.shard import Shard, parse
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial

POINTS = {"plan": ["step.start", "model.request", "checkpoint.committed"],
          "charge": ["step.start", "effect.received", "effect.applied", "effect.responded", "checkpoint.committed"],
          "email": ["step.start", "effect.received", "effect.applied", "effect.responded", "checkpoint.committed"]}


class Recorded(Scenario):
    """A scenario over fixed points whose trials only record what they were asked to run."""

    name = "recorded"

    def __init__(self) -> None:
        self.ran: list[tuple[str, int | None]] = []

    def concurrent(self) -> bool:
        return False

    def step_points(self, ctx: Context) -> dict[str, list[str]]:
        return POINTS

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None, **_: object) -> Trial:
        self.ran.append((str(schedule), seed))
        return Trial(f"recorded-{len(self.ran)}", schedule, seed, Evidence("x"), [Verdict("c", "pass", "ok")])


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_the_shards_union_is_the_whole_run_with_no_schedule_in_two(count: int) -> None:
    whole = Recorded()
    whole.run(Context(session=None, seed=11, random_count=20))  # type: ignore[arg-type]
    parts = []
    for k in range(1, count + 1):
        sc = Recorded()
        sc.run(Context(session=None, seed=11, random_count=20, shard=parse(f"{k}/{count}")))  # type: ignore[arg-type]
        parts.append(sc.ran)
    union = [r for part in parts for r in part]
    assert sorted(union, key=str) == sorted(whole.ran, key=str)  # all of them, none twice
    assert len(whole.ran) == len(exhaustive(POINTS)) + 20
    if count > 1:
        assert all(parts), "a shard got nothing: the split is by schedule, not by scenario"


def test_a_schedule_belongs_to_exactly_one_shard() -> None:
    plan = [(None, s) for s in exhaustive(POINTS)] + random_schedules(3, 50, POINTS)
    for seed, schedule in plan:
        owners = [k for k in range(1, 5) if Shard(k, 4).owns("crash-points", schedule, seed)]
        assert len(owners) == 1, (schedule, owners)


@pytest.mark.parametrize("text", ["0/3", "4/3", "2", "a/b", "", "1/0"])
def test_a_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse(text)
    assert info.value.code == "bad-shard" and "--shard 2/4" in info.value.fix
