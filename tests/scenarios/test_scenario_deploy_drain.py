"""deploy-drain: on the reference agent a SIGTERM with a long grace drains (step finished, `paused`,
exit 0, no new step, a new worker resumes) well within the grace; with a short grace the worker exits at
its drain deadline (6) or is SIGKILLed, and the resume is still correct. A worker that swallows SIGTERM
fails the scenario."""

from __future__ import annotations

from killpoint.faults.schedule import Schedule
from killpoint.report.text import trial_block
from killpoint.run.scenario import Context, ScenarioResult
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.deploy_drain import DeployDrain, Variant, drain_times
from tests.helpers.scenarios import failing, module_outcome, module_session, why

session = module_session("t_scenario_deploy_drain")
outcome = module_outcome(DeployDrain)


def _expecting(trials: list[Trial], expect: str) -> list[Trial]:
    return [t for t in trials if t.evidence.extra.get("expect") == expect]


def _ends(t: Trial) -> list[dict]:
    return t.evidence.incarnations


def test_the_reference_agent_passes(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    trials, result = outcome
    assert result.outcome == "pass", why(trials)
    assert {str(t.schedule) for t in _expecting(trials, "checkpoint")} == {
        f"{s}:step.start:term" for s in ("plan", "validate", "charge", "email", "record")} | {
        "email:effect.received:term"}
    assert len(_expecting(trials, "exit")) == 1 and len(_expecting(trials, "kill")) == 1


def test_a_long_grace_drains_the_step_and_a_new_worker_resumes(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    for t in _expecting(outcome[0], "checkpoint"):
        first, *rest = _ends(t)
        assert first["exit_code"] == 0 and first["signal"] is None, t.run_id
        mine = [w for w in t.evidence.audit if w["app"] == first["inc"]]
        assert mine[-1]["status"] == ("done" if str(t.schedule).startswith("record") else "paused"), mine
        if mine[-1]["status"] == "paused":
            assert rest and t.evidence.final["status"] == "done", t.run_id  # resumed by a new worker
        assert not [e for e in t.evidence.events if e["type"] == "escalate"]
        (drain,) = drain_times(t)
        assert 0 < drain < Variant.for_grace(5.0).drain_seconds, drain


def test_short_graces_end_in_exit_6_or_sigkill_and_resume_correctly(
        outcome: tuple[list[Trial], ScenarioResult]) -> None:
    (exits,) = _expecting(outcome[0], "exit")
    assert exits.evidence.knobs.grace == 0.8
    assert _ends(exits)[0]["exit_code"] == 6
    (killed,) = _expecting(outcome[0], "kill")
    assert killed.evidence.knobs.grace == 0.1
    assert _ends(killed)[0]["signal"] == 9
    assert [e["inc"] for e in killed.evidence.events if e["type"] == "escalate"] == [_ends(killed)[0]["inc"]]
    for t in (exits, killed):
        assert t.evidence.final["status"] == "done" and len(_ends(t)) == 2
        assert {v.checker for v in t.verdicts if v.outcome == "pass"} >= {"completes", "exactly_once",
                                                                            "same_final_state", "no_rewind"}


def test_figures_compare_drain_time_with_grace(outcome: tuple[list[Trial], ScenarioResult]) -> None:
    figures = outcome[1].figures
    assert figures.startswith("drain 0.") and "/ grace 5.0s" in figures, figures
    assert "grace 0.8s: exit 6" in figures and "grace 0.1s: SIGKILL" in figures, figures
    term = next(e for e in outcome[0][0].evidence.events if e["type"] == "fault")
    end = next(e for e in outcome[0][0].evidence.events if e["type"] == "inc.end")
    assert end["t"] > term["t"]


def test_replay_line_of_a_short_grace_trial_names_the_grace(outcome: tuple[list[Trial], ScenarioResult],
                                                            session: Session) -> None:
    (exits,) = _expecting(outcome[0], "exit")
    block = "\n".join(trial_block("deploy-drain", exits, session.agent.module))
    assert "killpoint replay --scenario deploy-drain --schedule 'charge:step.start:term' --grace 0.8" in block


def test_a_worker_that_swallows_sigterm_fails(session: Session) -> None:
    scenario = DeployDrain()
    scenario.steps = "tests.gallery.variants.ignores_sigterm"
    ctx = Context(session=session)
    long = scenario.trial(ctx, Schedule.parse("charge:step.start:term"))
    assert long.outcome == "fail" and failing(long) == {"drains_on_sigterm"}, why([long])
    assert "took new work after SIGTERM: started email, record" in long.failing()[0].reason
    short = scenario.trial(ctx, Schedule.parse("charge:step.start:term"), grace=0.8)
    assert short.outcome == "fail" and "drains_on_sigterm" in failing(short), why([short])
    assert "SIGKILLed" in next(v.reason for v in short.failing() if v.checker == "drains_on_sigterm")
