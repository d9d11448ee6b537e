"""zombie-worker: on the reference agent a worker frozen at any point of any step, superseded and
thawed, is fenced (its writes refused, exit 4) or finds its lease lost (exit 5), with no rewind and no
duplicate effect; frozen inside its checkpoint transaction it is thawed as soon as its successor waits on
its row lock (no deadlock). A store without the monotonic guard lets the zombie rewind the run: caught."""

from __future__ import annotations

from killpoint.checkers import CHECKERS, Evidence
from killpoint.events import Event, FaultFired
from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context, ScenarioResult
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.zombie_worker import ZombieWorker
from tests.helpers.scenarios import failing, module_outcome, module_session, why

session = module_session("t_scenario_zombie_worker")
outcome = module_outcome(ZombieWorker)


def _single(trials: list[Trial]) -> dict[str, Trial]:
    return {str(t.schedule): t for t in trials if len(t.schedule) == 1 and t.seed is None}


def test_the_reference_agent_passes_a_freeze_at_every_point(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    trials, result = outcome
    assert result.outcome == "pass", why(trials)
    single = _single(trials)
    assert len(single) == 23, sorted(single)  # 4 + 4 + 6 + 6 + 3 points of plan..record
    assert {s.split(":")[1] for s in single} == {"step.start", "model.request", "effect.received", "effect.applied",
                                                 "effect.responded", "checkpoint.writing", "checkpoint.committed"}
    assert any(len(t.schedule) > 1 for t in trials)  # and some nested freezes
    assert "zombies:" in result.figures and "fenced (exit 4)" in result.figures, result.figures


def test_each_zombie_stops_without_rewind_or_second_effect(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    for schedule, t in _single(outcome[0]).items():
        zombie = next(f["inc"] for f in t.evidence.faults())
        end = next(i for i in t.evidence.incarnations if i["inc"] == zombie)
        later = [w for w in t.evidence.audit if w["app"] != zombie][:1]
        if later:  # superseded: it must stop as fenced or lease-lost
            assert end["exit_code"] in (4, 5), (schedule, end)
        seqs = [w["seq"] for w in t.evidence.audit]
        assert seqs == sorted(set(seqs)), (schedule, seqs)
        assert len(t.evidence.effects) == 2, schedule  # one charge, one email


def test_a_zombie_frozen_in_its_transaction_is_thawed_when_its_successor_waits(
        outcome: tuple[list[Trial], ScenarioResult]) -> None:
    for step in ("plan", "validate", "charge", "email", "record"):
        t = _single(outcome[0])[f"{step}:checkpoint.writing:stop"]
        (thaw,) = [e for e in t.evidence.events if e["type"] == "thaw"]
        assert thaw["why"] == "successor waits on a lock the zombie holds", thaw
        assert t.evidence.limit is None
        successor = t.evidence.incarnations[1]
        assert successor["exit_code"] == 4  # its write lost the race for the row: fenced


def test_a_store_without_the_monotonic_guard_fails(session: Session) -> None:
    scenario = ZombieWorker()
    scenario.steps = "tests.gallery.variants.no_guard_in_worker"
    trial = scenario.trial(Context(session=session), Schedule.parse("charge:effect.responded:stop"))
    assert trial.outcome == "fail", why([trial])
    assert {"fenced_zombie", "no_rewind", "completes"} <= failing(trial), why([trial])


def _zombie_evidence(writes: list[tuple[int, str]], exits: dict[str, int]) -> Evidence:
    events: list[Event] = [FaultFired(inc="r#2", action="stop", step="charge", point="step.start")]
    return Evidence(run_id="r", events=events, audit=[{"seq": s, "app": a} for s, a in writes],
                    incarnations=[{"inc": i, "exit_code": c, "signal": None} for i, c in exits.items()])


def test_fenced_zombie_counts_only_incarnations_started_after_the_zombie() -> None:
    check = CHECKERS["fenced_zombie"]
    # r#1 wrote before r#2 was frozen: r#2 writing after that is no zombie write (a nested freeze)
    nested = _zombie_evidence([(1, "r#1"), (2, "r#2"), (3, "r#3")], {"r#1": 4, "r#2": 5, "r#3": 0})
    assert check(nested, None).outcome == "pass"
    late_write = _zombie_evidence([(1, "r#1"), (2, "r#3"), (3, "r#2")], {"r#1": 4, "r#2": 5, "r#3": 0})
    assert check(late_write, None).outcome == "fail"
    # nobody wrote after the zombie (its successor found the run done): nothing to fence it from, not exercised
    alone = _zombie_evidence([(1, "r#2"), (2, "r#2")], {"r#2": 0, "r#3": 0})
    assert check(alone, None).outcome == "n/a"
    superseded = _zombie_evidence([(1, "r#2"), (2, "r#3")], {"r#2": 0, "r#3": 0})
    assert check(superseded, None).outcome == "fail"
