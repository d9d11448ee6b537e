"""schema-upgrade: on the reference agent every run paused under v2 (invoice_agent_v2) and resumed under
v3 is migrated and ends as a run done wholly at v3; a v3 whose v2 -> v3 migration drops the approvals
fails; a user's step module without --previous-steps is skipped with the reason, never passed; previous
code at the same version is run, and passes when its checkpoints resume."""

from __future__ import annotations

from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context, ScenarioResult
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.schema_upgrade import SchemaUpgrade
from tests.helpers.scenarios import failing, module_outcome, module_session, why

PREVIOUS = "killpoint.reference_agent.invoice_agent_v2"


session = module_session("t_scenario_schema_upgrade")
outcome = module_outcome(SchemaUpgrade)


def test_the_reference_agent_passes(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    trials, result = outcome
    assert result.outcome == "pass", why(trials)
    assert [str(t.schedule) for t in trials] == [
        "plan:step.start:term", "validate:step.start:term", "charge:step.start:term", "email:step.start:term",
        "charge:effect.applied:kill", "email:effect.applied:kill"]
    assert result.figures == f"v2 -> v3 (previous code: {PREVIOUS}), paused at 6 points"


def test_each_run_pauses_at_v2_and_finishes_at_v3(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    for t in outcome[0]:
        ev = t.evidence
        assert ev.extra["seeded_version"] == 2 and ev.final["version"] == 3, t.run_id
        begins = [e["steps"] for e in ev.events if e["type"] == "run.begin"]
        assert begins == [PREVIOUS, "killpoint.reference_agent.invoice_agent"]
        incs = [i["inc"] for i in ev.incarnations]
        assert len(incs) == len(set(incs)) >= 2, incs  # one id per process across both drives
        assert {w["app"] for w in ev.audit} <= set(incs)
        assert "customer" in ev.final["state"] and "customer_email" not in ev.final["state"]


def test_a_migration_that_drops_state_fails(session: Session) -> None:
    scenario = SchemaUpgrade()
    scenario.steps = "tests.gallery.variants.bad_migration"
    trial = scenario.trial(Context(session=session, previous_steps=PREVIOUS), Schedule.parse("validate:step.start:term"))
    assert trial.outcome == "fail", why([trial])
    assert {"same_final_state", "context_fidelity"} <= failing(trial), why([trial])
    assert "migrates_older_version" not in failing(trial)  # it did migrate: to the wrong state


def test_without_previous_code_it_is_skipped_with_the_reason(session: Session) -> None:
    scenario = SchemaUpgrade()
    scenario.steps = "tests.gallery.variants.bad_migration"  # a "user's" module: no default previous code
    reason = scenario.skip_reason(Context(session=session))
    assert reason is not None and "--previous-steps" in reason, reason
    assert scenario.skip_reason(Context(session=session, previous_steps=PREVIOUS)) is None
    # the same STATE_VERSION is run, not skipped: its checkpoints must resume as they are (a state shape
    # changed without a bump is found there: tests/scenarios/test_scenario_schema_upgrade_git.py)
    assert scenario.skip_reason(Context(session=session, previous_steps="killpoint.reference_agent.invoice_agent")) is None


def test_previous_code_at_the_same_version_that_resumes_passes(session: Session) -> None:
    scenario = SchemaUpgrade()
    trial = scenario.trial(Context(session=session, previous_steps="killpoint.reference_agent.invoice_agent"),
                           Schedule.parse("charge:effect.applied:kill"))
    assert trial.outcome == "pass", why([trial])
    resumed = next(v for v in trial.verdicts if v.checker == "resumes_old_checkpoints")
    assert resumed.outcome == "pass" and "version-3 code resumed the version-3 checkpoint" in resumed.reason


def test_a_module_naming_its_previous_version_runs_without_the_flag(session: Session) -> None:
    """`PREVIOUS_STEPS` in the step module stands for --previous-steps: a plain `killpoint run --steps` of
    the missing_migration mutant pauses under its v1 code and catches the lost approval."""
    scenario = SchemaUpgrade()
    scenario.steps = "tests.gallery.mutants.missing_migration"
    ctx = Context(session=session)
    assert scenario.skip_reason(ctx) is None
    previous, _current, _label = scenario.previous(ctx)
    assert previous.module == "tests.gallery.mutants.invoice_agent_v1"
    trial = scenario.trial(ctx, Schedule.parse("validate:step.start:term"))
    assert trial.outcome == "fail" and "context_fidelity" in failing(trial), why([trial])


def test_an_agent_of_one_step_is_tested_by_a_kill_after_its_effect(session: Session) -> None:
    """A tool loop in one step (tests.corpus.one_step: a framework's runner in one durable step) leaves no
    checkpoint between steps, but a kill after its effect leaves the first one: the current code resumes
    it and the run passes (before, the scenario made no schedule and said UNKNOWN with no reason)."""
    scenario = SchemaUpgrade()
    scenario.steps = "tests.corpus.one_step"
    trials = scenario.run(Context(session=session, previous_steps="tests.corpus.one_step"))
    assert [str(t.schedule) for t in trials] == ["loop:effect.applied:kill"], why(trials)
    assert scenario.result(trials, 0.0).outcome == "pass", why(trials)
