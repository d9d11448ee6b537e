"""Crash tests of Acme's refund agent, through killpoint's pytest plugin.

``killpoint_session`` (from the plugin) starts Postgres, the fake services and a fork server that has
imported the agent, once per test session; each ``trial`` runs the agent under one fault schedule and
judges it against a crash-free run. ``conftest.py`` picks the agent (the ``killpoint_steps`` fixture).
"""

from killpoint import RunOptions, Schedule, TrialSpec, load_agent


def test_a_refund_is_booked_once_when_the_worker_dies_after_the_ledger_booked_it(killpoint_session):
    trial = killpoint_session.trial(Schedule.parse("refund:effect.applied:kill"))
    assert trial.outcome == "pass", trial.failing()
    assert [e["service"] for e in trial.evidence.effects].count("ledger") == 1


def test_the_email_is_sent_once_when_a_sigterm_lands_before_its_checkpoint(killpoint_session):
    trial = killpoint_session.trial(Schedule.parse("notify:effect.responded:term"))
    assert trial.outcome == "pass", trial.failing()


def test_the_row_commits_with_the_checkpoint_or_not_at_all(killpoint_session):
    trial = killpoint_session.trial(Schedule.parse("record:checkpoint.writing:kill"))
    assert trial.outcome == "pass", trial.failing()
    assert len(trial.evidence.own_effects) == 1  # the killed transaction left no row; the resumed one did


def test_several_faults_in_one_run(killpoint_session):
    schedule = Schedule.parse("decide:checkpoint.committed:kill,refund:effect.responded:kill,notify:step.start:term")
    trial = killpoint_session.trial(schedule)
    assert trial.outcome == "pass", trial.failing()


def test_an_escalated_request_is_emailed_once_and_never_refunded(killpoint_session):
    escalated = RunOptions(params={"reason": "changed-mind"})  # initial_state(params): not a refundable reason
    trial = killpoint_session.trial(Schedule.parse("notify:effect.applied:kill"), TrialSpec(options=escalated))
    assert trial.outcome == "pass", trial.failing()
    assert [e["service"] for e in trial.evidence.effects] == ["mailer"]
    assert trial.evidence.final["state"]["decision"] == "escalated"


def test_a_key_made_per_attempt_books_the_refund_twice(killpoint_session):
    trial = killpoint_session.trial(Schedule.parse("refund:effect.applied:kill"),
                                    TrialSpec(agent=load_agent("acme_refunds.keyless")))
    assert trial.outcome == "fail"
    assert "exactly_once" in [v.checker for v in trial.failing()]
