"""rollback-refusal: on the reference agent a newer checkpoint and two unreadable ones are each refused
with exit 3 and a message, the row untouched, no model call, no effect; a runtime without the version
check fails on the newer one (and still refuses what it cannot parse)."""

from __future__ import annotations

from types import MappingProxyType

from killpoint.checkers import Evidence
from killpoint.events import Note
from killpoint.faults.schedule import Schedule
from killpoint.report.text import trial_block
from killpoint.run.scenario import Context, ScenarioResult
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.rollback_refusal import KINDS, RollbackRefusal, refusal_explained
from tests.helpers.scenarios import failing, module_outcome, module_session, why

session = module_session("t_scenario_rollback_refusal")
outcome = module_outcome(RollbackRefusal)


def test_the_reference_agent_refuses_each_kind(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    trials, result = outcome
    assert result.outcome == "pass", why(trials)
    assert [t.evidence.extra["seeded_kind"] for t in trials] == list(KINDS)
    assert result.figures == "refused 3/3 with exit 3 (newer, missing-fields, not-an-object)"
    for t in trials:
        ev = t.evidence
        assert [i["exit_code"] for i in ev.incarnations] == [3]
        assert ev.final_raw == ev.extra["seeded_raw"]
        assert not ev.model_requests and not ev.attempts and not ev.effects
        notes = [e.note for e in ev.events if isinstance(e, Note) and str(e.note).startswith("refused")]
        assert notes == ["refused.newer" if ev.extra["seeded_kind"] == "newer" else "refused.incompatible"]


def test_the_refusal_names_the_newer_version(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    newer = outcome[0][0]
    said = next(v for v in newer.verdicts if v.checker == "refusal_explained")
    assert said.outcome == "pass" and "checkpoint version 4 is newer than this code's STATE_VERSION 3" in said.reason


def test_a_failing_trial_replays_by_its_seed(outcome: tuple[list[Trial], ScenarioResult], session: Session) -> None:
    block = "\n".join(trial_block("rollback-refusal", outcome[0][1], session.agent.module))
    assert "killpoint replay --scenario rollback-refusal --seed 1" in block


def test_a_runtime_without_the_version_check_fails(session: Session) -> None:
    scenario = RollbackRefusal()
    scenario.steps = "tests.gallery.variants.lax_versions"
    ctx = Context(session=session)
    newer = scenario.trial(ctx, Schedule(), seed=0)
    assert newer.outcome == "fail" and "refuses_newer_version" in failing(newer), why([newer])
    verdict = next(v for v in newer.failing() if v.checker == "refuses_newer_version")
    assert "the checkpoint row changed" in verdict.evidence and any("model request" in e for e in verdict.evidence)
    unreadable = scenario.trial(ctx, Schedule(), seed=1)
    assert unreadable.outcome == "pass", why([unreadable])


def test_a_silent_refusal_is_not_explained() -> None:
    ev = Evidence(run_id="r-1", incarnations=[{"inc": "r-1#1", "exit_code": 3, "signal": None}])
    def said(log: str) -> str:
        ev.extra = MappingProxyType({"seeded_kind": "newer", "seeded_version": 4, "logs": {"r-1#1": log}})
        return refusal_explained(ev, None).outcome

    assert said("worker: exiting\n") == "fail"
    assert said("REFUSED: version 4 is newer\n") == "pass"
    assert said("refused: something\n") == "fail"  # names no version
