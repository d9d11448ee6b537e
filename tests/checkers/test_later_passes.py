"""The exhaustive sweep faults every occurrence of a point the crash-free run reached, not only the first
(`faults.schedule.exhaustive` with `run.trial.point_occurrences`, up to `MAX_OCCURRENCES`).

The class it catches: a later pass of a loop does an effect the first pass does not, unprotected. A fault in
the first pass cannot show it (that pass does not do it), nor a fault between passes (the successor runs the
next pass whole): only a fault inside a later pass, `@2` and on. Two step modules of that class, in-process
(tests/gallery/mutants: installments whose second charge also mails a receipt under a fresh key; a model
loop whose later passes post to a keyless webhook), fail, every failing schedule is a later occurrence, and
the first occurrences, which were all a sweep ran before, pass. The correct look-alike (tests.corpus
installments, a loop keyed by the pass kept in the checkpoint) passes every occurrence. The same class on
LangGraph is in tests/examples/test_held_out_frameworks.py (a reminder loop copying a manager without a key).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.env.stepmodule import load
from killpoint.run.context import Context
from killpoint.run.scenario import find
from killpoint.run.trial import Session, Trial
from tests.helpers.harness import harness_session


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """One harness session for the module; each test sets its agent (baselines are per agent)."""
    with harness_session(pg_server, tmp_path_factory.mktemp("later"), "later_passes") as s:
        s.jobs = 2
        yield s


def sweep(session: Session, module: str) -> list[Trial]:
    """crash-points' exhaustive sweep of kills on the step module `module`."""
    session.agent = load(module)
    return find("crash-points").exhaustive(Context(session=session, seed=0, actions=("kill",)))


@pytest.mark.parametrize("mutant", ["installment_receipt", "opinion_webhook"])
def test_a_later_passes_unprotected_effect_is_caught_only_by_a_later_occurrence(session: Session,
                                                                                 mutant: str) -> None:
    trials = sweep(session, f"tests.gallery.mutants.{mutant}")
    failing = [t for t in trials if t.outcome == "fail"]
    assert failing, [str(t.schedule) for t in trials]
    checkers = [(str(t.schedule), [v.checker for v in t.failing()]) for t in failing]
    assert all(names == ["exactly_once"] for _, names in checkers), checkers
    assert all(t.schedule.faults[0].nth >= 2 for t in failing), [str(t.schedule) for t in failing]
    first = [t for t in trials if t.schedule.faults[0].nth == 1]
    assert first and all(t.outcome == "pass" for t in first), [(str(t.schedule), t.outcome) for t in first]


def test_the_correct_loop_passes_every_occurrence(session: Session) -> None:
    trials = sweep(session, "tests.corpus.installments")
    later = [t for t in trials if t.schedule.faults[0].nth >= 2]
    assert later, "the sweep faulted no later pass"
    assert all(t.outcome == "pass" for t in trials), [(str(t.schedule), t.failing()) for t in trials
                                                      if t.outcome != "pass"]
