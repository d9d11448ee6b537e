"""flaky-services: on the reference agent 5xx before applying, a connection dropped after applying,
latency and model overload are all absorbed by retries with the same keys, every effect once; a ledger
client that mints a new key for each retry charges twice and is caught."""

from __future__ import annotations

from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context, ScenarioResult
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.flaky_services import FlakyServices
from tests.helpers.scenarios import failing, module_outcome, module_session, why

session = module_session("t_scenario_flaky_services")
outcome = module_outcome(FlakyServices)


def test_the_reference_agent_passes(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    trials, result = outcome
    assert result.outcome == "pass", why(trials)
    single = {str(t.schedule) for t in trials if t.seed is None}
    assert single == {"plan:model.request:error", "plan:model.request:slow", "plan:model.request:overload",
                      "validate:model.request:error", "validate:model.request:slow",
                      "validate:model.request:overload", "charge:effect.received:error",
                      "charge:effect.received:slow", "charge:effect.applied:drop", "email:effect.received:error",
                      "email:effect.received:slow", "email:effect.applied:drop",
                      "charge:effect.applied:error", "charge:effect.applied:overload",  # the ambiguous failure
                      "email:effect.applied:error", "email:effect.applied:overload",
                      # outages until the resume: every retry fails, the worker ends, the next one goes on
                      "plan:model.request:outage", "validate:model.request:outage",
                      "charge:effect.received:outage", "email:effect.received:outage"}
    multi = [t for t in trials if t.seed is not None]
    assert multi and all(len(t.schedule) > 1 for t in multi)
    assert "effect retries deduplicated" in result.figures, result.figures


def test_retries_keep_the_key_and_the_effect_stays_single(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    by = {str(t.schedule): t for t in outcome[0]}
    dropped = by["charge:effect.applied:drop"].evidence
    charges = [a for a in dropped.attempts if a["service"] == "ledger"]
    assert [a["outcome"] for a in charges] == ["dropped", "deduplicated"], charges
    assert len({a["key"] for a in charges}) == 1
    assert len([e for e in dropped.effects if e["service"] == "ledger"]) == 1
    errored = by["email:effect.received:error"].evidence
    assert [a["outcome"] for a in errored.attempts if a["service"] == "mailer"] == ["injected-error", "applied"]
    overloaded = by["plan:model.request:overload"].evidence
    assert [r["retry_count"] for r in overloaded.model_requests][:2] == [0, 1]


def test_a_client_that_rekeys_its_retries_fails(session: Session) -> None:
    scenario = FlakyServices()
    scenario.steps = "tests.gallery.variants.rekeying_retries"
    trial = scenario.trial(Context(session=session), Schedule.parse("charge:effect.applied:drop"))
    assert trial.outcome == "fail", why([trial])
    assert {"exactly_once", "retries_keep_keys"} <= failing(trial), why([trial])
    assert "done twice" in next(v.reason for v in trial.failing() if v.checker == "exactly_once")
