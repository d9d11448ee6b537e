"""shared-account, sampling-model and concurrent-runs on one in-process session: the reference agent and the
correct lookalikes pass, and a mutant of each class fails with the checker that names its bug (the CLI
replay of every mutant is tests/checkers/test_mutants.py's)."""

from __future__ import annotations

import copy

import pytest

from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Session
from killpoint.scenarios.concurrent_runs import ConcurrentRuns
from killpoint.scenarios.sampling_model import SamplingModel, final_answers
from killpoint.scenarios.shared_account import SharedAccount
from tests.helpers.scenarios import failing, module_session, why

session = module_session("harsh_world")

MUTANTS = "tests.gallery.mutants"
VARIANTS = "tests.gallery.variants"


def on(scenario: Scenario, steps: str | None) -> Scenario:
    """The scenario run on `steps` (None: the session's reference agent)."""
    mine = copy.copy(scenario)
    mine.steps = steps
    return mine


@pytest.mark.parametrize("steps", [None, f"{VARIANTS}.invoice_key"])
def test_shared_account_passes_keys_that_name_the_run_or_the_invoice(session: Session, steps: str | None) -> None:
    trials = on(SharedAccount(), steps).cycle(Context(session=session), Schedule(), 5)
    assert len(trials) == 3 and all(t.outcome == "pass" for t in trials), why(trials)


def test_shared_account_finds_a_charge_keyed_on_the_customer(session: Session) -> None:
    trials = on(SharedAccount(), f"{MUTANTS}.account_key").cycle(Context(session=session), Schedule(), 5)
    assert [t.outcome for t in trials] == ["pass", "fail", "fail"], why(trials)
    assert "exactly_once" in failing(trials[1])  # the same amount: replayed, never charged
    assert "completes" in failing(trials[2])  # another amount: 422 idempotency_error, the run cannot finish


@pytest.mark.parametrize(("steps", "schedule"), [
    (None, "validate:checkpoint.writing:kill"),
    (f"{VARIANTS}.decision_memo", "validate:checkpoint.writing:kill"),
])
def test_sampling_model_passes_decisions_checkpointed_before_their_effects(session: Session, steps: str | None,
                                                                          schedule: str) -> None:
    scenario = on(SamplingModel(), steps)
    ctx = Context(session=session)
    trial = scenario.trial(ctx, Schedule.parse(schedule, scenario.agent(ctx).steps))
    assert trial.outcome == "pass", why([trial])
    if steps is None:  # the resumed step heard another answer, and was judged against its counterfactual,
        assert final_answers(trial.evidence)  # a crash-free run named by the trial (so trials may run at once)
        with session.env.pooled() as conn:
            named = conn.execute("SELECT count(*) FROM killpoint_audit WHERE run_id = %s",
                                 (f"{trial.run_id}-counterfactual",)).fetchone()
        assert named is not None and named[0] > 0, trial.run_id


def test_sampling_model_finds_a_charge_made_on_a_replaced_approval(session: Session) -> None:
    scenario = on(SamplingModel(), f"{MUTANTS}.approve_and_charge")
    ctx = Context(session=session)
    trial = scenario.trial(ctx, Schedule.parse("validate:checkpoint.writing:kill", scenario.agent(ctx).steps))
    assert "decisions_hold" in failing(trial), why([trial])


@pytest.mark.parametrize("steps", [None, f"{VARIANTS}.balance_in_txn", f"{VARIANTS}.stored_ids",
                                   f"{VARIANTS}.receipt_note"])  # own rows naming the ids providers minted
def test_concurrent_runs_pass_updates_made_in_the_checkpoint_transaction(session: Session, steps: str | None) -> None:
    trials = on(ConcurrentRuns(), steps).together(Context(session=session), Schedule(), 0)
    assert len(trials) == 6 and all(t.outcome == "pass" for t in trials), why(trials)


def test_concurrent_runs_find_a_lost_update(session: Session) -> None:
    trials = on(ConcurrentRuns(), f"{MUTANTS}.balance_outside_txn").together(Context(session=session), Schedule(), 0)
    concurrent = trials[:3]
    assert all({"invariants_hold", "same_as_serial"} <= failing(t) for t in concurrent), why(trials)
