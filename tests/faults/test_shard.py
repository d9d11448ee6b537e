"""`--shard K/N` partitions the trials of a run: the shards' union is the whole set and no trial is in two,
for the schedules of the generated plans and for the scenarios that build their own plans (fleet,
deploy-drain, rollback-refusal, schema-upgrade, stalled-sweep), on real runs; a shard left with none of a
scenario's trials reports it skipped, not unknown; a negative control runs whole in one shard; a bad K/N
is one line, exit 2."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.env.postgres import PostgresHandle
from killpoint.errors import UsageError
from killpoint.faults.schedule import Schedule, exhaustive, random_schedules
from killpoint.faults.shard import Shard, parse
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.deploy_drain import DeployDrain
from killpoint.scenarios.fleet import FleetScenario
from killpoint.scenarios.rollback_refusal import RollbackRefusal
from killpoint.scenarios.schema_upgrade import SchemaUpgrade
from killpoint.scenarios.stalled_sweep import StalledSweep
from tests.helpers.harness import harness_session

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


class Control(Recorded):
    """A negative control over the same points: its finding is judged over all its trials together."""

    name = "recorded-control"
    expected_finding = True


@pytest.mark.parametrize("count", [2, 3])
def test_a_negative_control_runs_whole_in_exactly_one_shard(count: int) -> None:
    whole = Control()
    whole.run(Context(session=None, seed=11, random_count=4))  # type: ignore[arg-type]
    runs = []
    for k in range(1, count + 1):
        sc = Control()
        trials = sc.run(Context(session=None, seed=11, random_count=4, shard=parse(f"{k}/{count}")))  # type: ignore[arg-type]
        runs.append(sc.ran)
        if not trials:  # the shards without it say so: skipped, neither unknown nor a missed finding
            result = sc.result(trials, 0.0)
            assert (result.outcome, result.reason) == ("skipped", f"--shard: all {len(whole.ran)} of its trials "
                                                                  "run in other shards")
    assert sorted(len(r) for r in runs) == [0] * (count - 1) + [len(whole.ran)]


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


# ---- the scenarios that build their own plans, on real runs ------------------------------------------------

def _small_fleet() -> FleetScenario:
    sc = FleetScenario()
    sc.runs, sc.workers, sc.faults = 3, 2, 2
    return sc


def _small_sweep() -> StalledSweep:
    sc = StalledSweep()
    sc.runs = 2
    return sc


OWN_PLANS: dict[str, Callable[[], Scenario]] = {
    "fleet": _small_fleet, "deploy-drain": DeployDrain, "rollback-refusal": RollbackRefusal,
    "schema-upgrade": SchemaUpgrade, "stalled-sweep": _small_sweep}
SHARDS = 2


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("shard"), "t_faults_shard") as s:
        yield s


def _units(trials: list[Trial]) -> set[tuple[object, ...]]:
    """The trials' units, by what names them: schedule, seed, the grace a drain ran with, the kind of
    checkpoint a refusal was seeded with (a fleet's or a round's runs are one unit)."""
    return {(str(t.schedule), t.seed, t.evidence.knobs.grace, t.evidence.extra.get("seeded_kind"))
            for t in trials}


@pytest.fixture(scope="module")
def split(session: Session) -> dict[str, tuple[set, list[set], list[str]]]:
    """Per scenario: the units of its whole run, of each of the shards' runs, and the shards' outcomes."""
    out = {}
    for name, make in OWN_PLANS.items():
        whole = _units(make().run(Context(session=session, seed=5)))
        parts, outcomes = [], []
        for k in range(1, SHARDS + 1):
            sc = make()
            trials = sc.run(Context(session=session, seed=5, shard=parse(f"{k}/{SHARDS}")))
            parts.append(_units(trials))
            outcomes.append(sc.result(trials, 0.0).outcome)
        out[name] = (whole, parts, outcomes)
    return out


@pytest.mark.parametrize("name", list(OWN_PLANS))
def test_a_scenario_with_its_own_plan_is_split_by_trial_across_the_shards(
        name: str, split: dict[str, tuple[set, list[set], list[str]]]) -> None:
    whole, parts, outcomes = split[name]
    assert whole, f"{name} ran no trial"
    assert set().union(*parts) == whole  # the shards together ran the whole set
    assert sum(len(p) for p in parts) == len(whole)  # and no trial in two shards
    for part, outcome in zip(parts, outcomes, strict=True):
        assert (outcome == "skipped") == (not part), (name, outcome, part)  # a shard without any: skipped


def test_the_own_plans_are_spread_over_the_shards(split: dict[str, tuple[set, list[set], list[str]]]) -> None:
    """Some scenario's trials land in both shards: the split is by trial, not by scenario."""
    assert any(all(parts) for _whole, parts, _o in split.values())
