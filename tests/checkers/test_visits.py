"""Per-visit attribution: a step visited more than once is judged per visit (checkers/visits.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from tests.gallery.mutants import BY_NAME
from tests.helpers.harness import harness_session

INSTALLMENT_BUGS = ("installment_step_key", "installment_amount_key", "installment_day_key")


@pytest.mark.parametrize("name", INSTALLMENT_BUGS)
def test_a_colliding_per_visit_key_fails_exactly_once_as_a_missing_effect(
        name: str, pg_server: PostgresHandle, tmp_path: Path) -> None:
    mutant = BY_NAME[name]
    with harness_session(pg_server, tmp_path / "runs", f"visits_{name}", steps=mutant.module) as s:
        said_first = [v.checker for v in s.crash_free_findings()]  # the crash-free run has the bug too
        trial = s.trial(Schedule.parse(mutant.schedule, s.agent.steps))
    assert said_first == ["exactly_once"], said_first
    verdicts = {v.checker: v for v in trial.verdicts}
    assert verdicts["exactly_once"].outcome == "fail", trial.verdicts
    assert verdicts["exactly_once"].evidence[0].startswith("missing x1: ledger"), verdicts["exactly_once"]
    assert "charge (visit 2)" in verdicts["exactly_once"].evidence[0]
    assert verdicts["bounded_rework"].outcome == "pass", verdicts["bounded_rework"]
