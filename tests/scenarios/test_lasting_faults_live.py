"""Faults that last, live (issue 23): the correct agents that look like the clock and outage bugs pass the
schedules that catch those bugs, on a real worker, Postgres and fake services; and the outage and the clock
jump did what they say (the retries all failed, the resumed worker read the moved clock). The mutants'
catches go through the CLI in tests/checkers/test_mutants.py; the 1,000-schedule figure is bench's
(bench/lasting_faults.py)."""

from __future__ import annotations

from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context
from killpoint.run.trial import Session
from killpoint.scenarios.mixed_faults import MixedFaults
from tests.helpers.scenarios import module_session, why

session = module_session("t_lasting_faults_live")


def _trial(session: Session, steps: str, schedule: str):  # type: ignore[no-untyped-def]
    scenario = MixedFaults()
    scenario.steps = steps
    return scenario.trial(Context(session=session), Schedule.parse(schedule))


def test_a_period_read_once_and_checkpointed_survives_a_resume_a_year_later(session: Session) -> None:
    trial = _trial(session, "tests.gallery.variants.period_checkpointed", "charge:checkpoint.writing:clock+366d")
    assert trial.outcome == "pass", why([trial])
    ledger = [e for e in trial.evidence.effects if e["service"] == "ledger"]
    assert len(ledger) == 1 and ledger[0]["key"].endswith(trial.evidence.final["state"]["period"])
    assert len(trial.evidence.incarnations) == 2  # killed at the jump, resumed once


def test_an_except_that_reraises_survives_an_outage_longer_than_the_retries(session: Session) -> None:
    trial = _trial(session, "tests.gallery.variants.reraise_after_retries", "charge:effect.received:outage")
    assert trial.outcome == "pass", why([trial])
    outcomes = [a["outcome"] for a in trial.evidence.attempts if a["service"] == "ledger"]
    assert outcomes[:4] == ["injected-error"] * 4 and outcomes[4:] == ["applied"], outcomes  # 4 attempts, then resumed


def test_the_reference_agent_passes_counted_outages_and_clock_jumps_together(session: Session) -> None:
    trial = _trial(session, "killpoint.reference_agent.invoice_agent",
                   "validate:model.request:outage=5,charge:checkpoint.writing:clock+366d,"
                   "email:checkpoint.writing:clock-1h")
    assert trial.outcome == "pass", why([trial])
    assert len(trial.evidence.incarnations) >= 4  # the model outage ended one, each jump killed one
