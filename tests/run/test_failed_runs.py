"""A run that ends `failed` is reported as failed, with its status and its last error, and is not restarted.

The probe `tests/gallery/variants/stamped_email.py` puts the time in its mail under a stable key: killed after
the mailer applied the mail, the resumed step sends the same key with another body, the mailer answers 422
and the runtime checkpoints the run as `failed`. The controller stops at that status (harness/run/controller.py
`run`) and `completes` (harness/checkers/outcome.py) names the status and the mailer's answer, where it used to
restart the run up to the incarnation bound and report `liveness: not done after 6 incarnations`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from killpoint.checkers import Evidence
from killpoint.checkers.outcome import completes
from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.trial import Session
from tests.helpers.harness import harness_session

PROBE = "tests.gallery.variants.stamped_email"


def test_completes_names_the_failed_status_and_the_last_error() -> None:
    final = {"cursor": "email", "status": "failed", "state": {"error": "mailer answered 422: conflict"}}
    verdict = completes(Evidence("r", final=final, limit="not done after 6 incarnations (bound 6)"), None)
    assert verdict.outcome == "fail"
    assert verdict.reason == "the run ended failed at cursor 'email': mailer answered 422: conflict"
    assert "liveness" not in verdict.reason
    crashed = Evidence("r", final={"cursor": "email", "status": "failed", "state": {}},
                       crashes={"r#1": {"tail": ["Traceback (most recent call last):", "KeyError: 'mail'"]}})
    assert completes(crashed, None).reason.endswith(": KeyError: 'mail'")


@pytest.fixture(scope="module")
def probe_session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("failed"), "test_failed_runs", steps=PROBE) as s:
        yield s


def test_a_run_that_ends_failed_is_reported_failed_and_not_restarted(probe_session: Session) -> None:
    trial = probe_session.trial(Schedule.parse("email:effect.applied:kill", probe_session.agent.steps))
    assert trial.outcome == "fail", trial.verdicts
    (verdict,) = [v for v in trial.verdicts if v.checker == "completes"]
    assert verdict.outcome == "fail"
    assert verdict.reason.startswith("the run ended failed at cursor 'email': mailer answered 422"), verdict
    assert trial.evidence.limit is None
    assert trial.evidence.final is not None and trial.evidence.final["status"] == "failed"
    assert [i["role"] for i in trial.evidence.incarnations] == ["worker", "worker"]  # killed, resumed, failed: over
