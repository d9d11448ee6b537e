"""`--shard K/N` partitions the trials of a run: the shards' union is the whole set and no trial is in two,
weighted or not; each plan is dealt evenly (by weight, within one trial), the same on every machine; the
shard holding a negative control gets less of the rest, so the default suite's estimated balance is <= 1.2;
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
from killpoint.faults.schedule import MAX_OCCURRENCES, Schedule, exhaustive, random_schedules
from killpoint.faults.shard import Shard, parse
from killpoint.run.plans import weigh_shards
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

    def occurrences(self, ctx: Context) -> dict[str, dict[str, int]]:
        return {}  # each point reached once, as the reference agent's

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


@pytest.mark.parametrize("weights", [(), (1000, 767), (1000, 535, 1000), (0, 1000, 250, 1000, 1000)])
def test_a_weighted_deal_is_still_a_partition(weights: tuple[int, ...]) -> None:
    count = len(weights) or 3
    whole = Recorded()
    whole.run(Context(session=None, seed=11, random_count=20))  # type: ignore[arg-type]
    parts = []
    for k in range(1, count + 1):
        sc = Recorded()
        sc.run(Context(session=None, seed=11, random_count=20, shard=Shard(k, count, weights)))  # type: ignore[arg-type]
        parts.append(sc.ran)
    assert sorted((r for part in parts for r in part), key=str) == sorted(whole.ran, key=str)
    assert [bool(p) for p in parts] == [w > 0 for w in weights or (1,) * count]  # a weight of 0: nothing


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 8])
def test_equal_shards_get_floor_or_ceil_of_every_plan(count: int) -> None:
    """Dealt, not drawn: a plan of n trials gives each shard n // N or n // N + 1 of them, whatever the
    names (drawn by a hash per trial, the default suite's 54 crash-points trials came out 4 to 11 per shard
    of 8, flaky-services' 24 1 to 6)."""
    for n in range(0, 60):
        owners = Shard(1, count).deal("crash-points", [f"email:step.start:kill@{i}|" for i in range(n)])
        per = [owners.count(k) for k in range(1, count + 1)]
        assert sum(per) == n and max(per) - min(per) <= 1, (n, per)


def test_weighted_shards_get_their_share_of_every_plan_within_one_trial() -> None:
    weights = (1000, 69, 1000, 1000, 1000, 1000, 1000, 500)
    for n in (1, 9, 29, 54, 200):
        owners = Shard(1, 8, weights).deal("mixed-faults", [f"t{i}|" for i in range(n)])
        for k, w in enumerate(weights, 1):
            assert abs(owners.count(k) - n * w / sum(weights)) < 1 + 1e-9, (n, k, owners.count(k))


def test_over_many_plans_every_shard_gets_its_share_not_only_within_one_trial_of_each() -> None:
    """Rounded the same way in every plan, the shards after a low-weight run (the whole units' shards) got
    the extra trial of plan after plan: in a measured suite of 8 shards the first full-weight shard ran 36
    trials, the others 25-33 (balance 1.22). Over 600 small plans each shard's count is its share within
    10 %, a shard of a fifth of a share included (it got none before)."""
    weights = (600, 600, 600, 1000, 1000, 1000, 1000, 200)
    counts = [0] * len(weights)
    for i in range(600):
        for owner in Shard(1, len(weights), weights).deal(f"s{i}", [f"t{i}-{k}|" for k in range(1 + i % 11)]):
            counts[owner - 1] += 1
    for count, w in zip(counts, weights, strict=True):
        share = sum(counts) * w / sum(weights)
        assert abs(count - share) <= 0.1 * share, (counts, [round(sum(counts) * w / sum(weights)) for w in weights])


def test_the_deal_is_the_same_on_every_machine() -> None:
    """A pure function of the plan: SHA-256 and integer arithmetic (these values were computed once; a change
    of them moves trials between the shards of pipelines already running)."""
    names = [f"charge:effect.applied:kill@{i}|" for i in range(6)]
    assert Shard(1, 3).deal("crash-points", names) == Shard(2, 3).deal("crash-points", names) == [1, 3, 2, 1, 3, 2]
    assert Shard(1, 4, (1000, 535, 1000, 1000)).deal("fleet", ["x|1"]) == [3]
    assert [Shard(1, 4).owner("crash-points", Schedule(), s) for s in range(4)] == [2, 3, 3, 2]


def test_the_shard_holding_a_whole_unit_gets_less_of_the_rest() -> None:
    """Water-filling: every shard's estimated seconds (its whole units + its share of the rest) even, unless
    a unit alone exceeds an even share; the correct-looking case (no unit held) stays all equal."""
    cases = [(8, {2: 9.6}, 72.9), (4, {2: 9.6}, 72.9), (2, {1: 9.6}, 72.9),  # the reference suite's control
             (4, {1: 5.0, 3: 5.0}, 40.0), (4, {3: 6.0, 4: 2.0}, 30.0),  # two units, on two shards
             (3, {1: 50.0}, 10.0)]  # a unit larger than an even share: its shard gets nothing else
    for count, held, rest in cases:
        weights = Shard(1, count).weighted(held, rest).weights
        loads = [held.get(k, 0.0) + rest * w / sum(weights) for k, w in enumerate(weights, 1)]
        level = max(loads[k - 1] for k in range(1, count + 1) if weights[k - 1])
        assert all(abs(x - level) < 0.01 * level for x, w in zip(loads, weights, strict=True) if w), (held, loads)
        assert all(x >= 0.99 * level for x in loads), (held, loads)  # a shard with none: its units alone
    assert Shard(1, 4).weighted({}, 72.9).weights == ()


class Weighed:
    """A scenario as `weigh_shards` reads it."""

    def __init__(self, name: str, cost: float, control: bool = False, skip: str | None = None) -> None:
        self.name, self.cost, self.expected_finding, self.skip = name, cost, control, skip
        self.whole = False
        self.local_plan = False

    def skip_why(self, ctx: Context) -> str | None:
        return self.skip


def test_the_session_weighs_its_shards_by_the_control_it_will_run() -> None:
    """The control's shard gets less only when the control runs in this session; without --shard, nothing."""
    ctx = Context(session=None, shard=parse("1/4"))  # type: ignore[arg-type]
    others = [Weighed("a", 30.0), Weighed("b", 20.0)]
    weighed = weigh_shards([*others, Weighed("c", 10.0, control=True)], ctx)
    assert weighed is not None
    assert min(weighed.weights) == weighed.weights[weighed.holder("c") - 1] < max(weighed.weights)
    assert (weighed.index, weighed.count) == (1, 4)
    skipped = weigh_shards([*others, Weighed("c", 10.0, control=True, skip="not your agent")], ctx)
    assert skipped == Shard(1, 4)  # equal shares: the control will not run
    assert weigh_shards(others, Context(session=None)) is None  # type: ignore[arg-type]


def test_a_skipped_dealt_scenario_weighs_nothing() -> None:
    """The rest that the control's shard gets less of is the cost of the dealt scenarios that will run: one
    skipped here (schema-upgrade with no previous code) would give every other shard more than its share."""
    ctx = Context(session=None, shard=parse("1/2"))  # type: ignore[arg-type]
    control = Weighed("c", 10.0, control=True)
    running = weigh_shards([Weighed("a", 30.0), control], ctx)
    with_skipped = weigh_shards([Weighed("a", 30.0), Weighed("b", 50.0, skip="no previous code"), control], ctx)
    counted = weigh_shards([Weighed("a", 30.0), Weighed("b", 50.0), control], ctx)
    assert running is not None and with_skipped == running, (running, with_skipped)
    assert counted is not None and counted.weights != running.weights  # the skipped one was what moved them
    local = Weighed("kept", 50.0)
    local.local_plan = True  # split by name whatever it holds, and this machine's store may be empty
    assert weigh_shards([Weighed("a", 30.0), local, control], ctx) == running


def test_whole_units_are_placed_apart_costliest_first_the_same_by_every_shard() -> None:
    """A fleet, a set of concurrent runs and a control: one shard each from 3 shards up (hashed, the fleet,
    the concurrent runs and shared-account's cycle all landed on shard 1 of the suite's 8 in a measured
    run); on 2 shards the control alone on one."""
    units = {"non-idempotent-downstream": 9.6, "fleet": 1.6, "concurrent-runs": 1.3}
    for count in (2, 3, 4, 8):
        placings = [Shard(k, count).placing(units, 60.0) for k in range(1, count + 1)]
        assert len({(p.placed, p.weights) for p in placings}) == 1  # every shard agrees
        holders = {name: placings[0].holder(name) for name in units}
        if count >= 3:
            assert len(set(holders.values())) == 3, holders
        else:
            assert holders["fleet"] == holders["concurrent-runs"] != holders["non-idempotent-downstream"]
    assert Shard(1, 4).holder("fleet") == Shard(1, 4).owner("fleet", "negative-control")  # nothing placed it


# the estimated seconds and trials of each scenario of the default suite (reference agent, -j 1, seed 1)
SUITE = {"crash-points": (11.4, 54), "db-crash": (3.1, 10), "deploy-drain": (6.1, 8),
         "flaky-services": (7.2, 24), "mixed-faults": (18.1, 34), "rollback-refusal": (0.3, 3),
         "sampling-model": (6.9, 16), "schema-upgrade": (3.5, 6),
         "stalled-sweep": (1.4, 2), "zombie-worker": (9.9, 27)}
UNITS = {"non-idempotent-downstream": 9.6, "fleet": 1.6, "shared-account": 1.6, "concurrent-runs": 1.3}


def _estimated_balance(shard: Shard) -> float:
    """The slowest shard's estimated seconds / the mean's, for the suite's units held as `shard` places them
    and its plans dealt by `shard`."""
    loads = [0.0] * shard.count
    for name, cost in UNITS.items():
        loads[shard.holder(name) - 1] += cost
    for name, (cost, n) in SUITE.items():
        for owner in shard.deal(name, [f"{name}-{i}|" for i in range(n)]):
            loads[owner - 1] += cost / n
    return max(loads) / (sum(loads) / len(loads))


@pytest.mark.parametrize("count", [2, 4, 8])
def test_the_default_suite_is_balanced_by_estimate(count: int) -> None:
    """The issue's target, on the estimates (the measured figures are bench/shards.py's): the slowest shard
    within 1.2 of the mean. Placing the whole units and weighing around them is what it takes: with neither
    (each unit on the shard its name hashes to, equal weights), 8 shards are not."""
    rest = sum(cost for cost, _ in SUITE.values())
    assert _estimated_balance(Shard(1, count).placing(UNITS, rest)) <= 1.2
    if count == 8:
        assert _estimated_balance(Shard(1, count)) > 1.2


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


def test_a_point_reached_more_often_than_the_sweep_faults_is_said_once() -> None:
    """A loop of more than MAX_OCCURRENCES passes: the sweep faults its first five and says which points it
    cut (only points the scenario sweeps)."""
    class Looping(Recorded):
        def occurrences(self, ctx: Context) -> dict[str, dict[str, int]]:
            return {"charge": {"effect.applied": MAX_OCCURRENCES + 3, "not.swept": 50}}

    said: list[str] = []
    sc = Looping()
    sc.run(Context(session=None, seed=11, random_count=0, say=said.append))  # type: ignore[arg-type]
    applied = [s for s, _ in sc.ran if s.startswith("charge:effect.applied")]
    assert applied[-1] == f"charge:effect.applied:term@{MAX_OCCURRENCES}" and len(applied) == 2 * MAX_OCCURRENCES
    cut = [m for m in said if "not swept" in m]
    assert cut == [f"recorded: the sweep faults the first {MAX_OCCURRENCES} times a step reaches a point; later "
                   f"ones are not swept: charge:effect.applied ({MAX_OCCURRENCES + 3} times)"], said
