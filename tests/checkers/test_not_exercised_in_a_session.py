"""A checker with nothing to hold in a real session says `n/a`, never pass, and the trial is judged by the
rest: `retries_keep_keys` on agents that send no service request, `exactly_once` on one that makes no effect
at all, through mixed-faults' trials (process and service faults; these agents offer only process points).

The agents (tests/gallery/quiet/): other step names, no model calls, no services; `own_rows` keeps its own
table, whose rows are its effects (judged: pass), `no_effects` keeps nothing but its checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from killpoint.checkers.verdict import Verdict
from killpoint.env.postgres import PostgresHandle
from killpoint.run.context import Context
from killpoint.run.scenario import find
from killpoint.run.trial import Session, Trial
from tests.helpers.harness import harness_session


@pytest.fixture(scope="module", params=["own_rows", "no_effects"])
def quiet(request: pytest.FixtureRequest, pg_server: PostgresHandle,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    name = request.param
    with harness_session(pg_server, tmp_path_factory.mktemp(name), f"t_quiet_{name}",
                         steps=f"tests.gallery.quiet.{name}") as s:
        yield s


def by_checker(trials: list[Trial], checker: str) -> list[Verdict]:
    return [v for t in trials for v in t.verdicts if v.checker == checker]


def test_checkers_without_evidence_are_not_exercised_and_the_trials_still_pass(quiet: Session) -> None:
    trials = find("mixed-faults").run(Context(session=quiet, seed=3, random_count=2, named=("mixed-faults",)))
    assert trials and all(t.outcome == "pass" for t in trials), [(t.schedule, t.verdicts) for t in trials]
    assert any(t.schedule.faults for t in trials)  # faults were injected: a crash-free run would prove little
    keys = by_checker(trials, "retries_keep_keys")
    assert len(keys) == len(trials)
    assert all(v.outcome == "n/a" and "no service request" in v.reason for v in keys), keys
    once = by_checker(trials, "exactly_once")
    if quiet.agent.module.endswith("own_rows"):  # its own rows are effects: judged
        assert all(v.outcome == "pass" and "1 effects" in v.reason for v in once), once
    else:
        assert all(v.outcome == "n/a" and "neither" in v.reason for v in once), once
