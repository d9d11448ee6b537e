"""Every failing multi-fault schedule is shrunk (within a budget), and the output says from what to what.
The scenario's trials are judged by a rule here (a schedule fails when it holds the fatal fault), so the
policy is tested without running agents; the shrinking of real runs is tested in tests/checkers/test_mutants.py."""

from __future__ import annotations

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.faults.schedule import Schedule
from killpoint.report.text import trial_block
from killpoint.run.scenario import Context, Scenario
from killpoint.run.shrinking import with_shrunk
from killpoint.run.trial import Trial

FATAL = "email:effect.applied:kill"


class Judged(Scenario):
    """A scenario whose trials fail exactly when their schedule holds FATAL (or `charge:step.start:term`)."""

    name = "judged"

    def __init__(self) -> None:
        self.ran: list[str] = []

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        self.ran.append(str(schedule))
        bad = any(str(f) in (FATAL, "charge:step.start:term") for f in schedule)
        verdict = Verdict("exactly_once", "fail" if bad else "pass", "duplicate" if bad else "ok")
        return Trial(f"judged-{len(self.ran)}", schedule, seed, Evidence("x"), [verdict])


def context(said: list[str]) -> Context:
    return Context(session=None, say=said.append)  # type: ignore[arg-type]  # shrinking needs no session


def test_every_failure_is_shrunk_and_says_from_what_to_what() -> None:
    sc, said = Judged(), []
    ctx = context(said)
    found = [sc.trial(ctx, Schedule.parse(s), seed=i) for i, s in enumerate(
        ["plan:step.start:kill," + FATAL + ",record:step.start:term", "charge:step.start:kill," + FATAL,
         "plan:step.start:term,charge:step.start:term", "plan:step.start:kill"])]
    out = with_shrunk(sc, ctx, found)
    shrunk = out[len(found):]
    assert [(str(t.schedule), str(t.shrunk_from)) for t in shrunk] == [
        (FATAL, "plan:step.start:kill," + FATAL + ",record:step.start:term"),
        ("charge:step.start:term", "plan:step.start:term,charge:step.start:term")]  # the third failure too
    assert f"judged: shrunk plan:step.start:kill,{FATAL},record:step.start:term (3 faults) to {FATAL} (1 fault)" \
        in " ".join(said)
    block = "\n".join(trial_block("judged", shrunk[0], "my.steps"))
    assert f"shrunk:   from plan:step.start:kill,{FATAL},record:step.start:term (3 faults) to 1 fault" in block


def test_shrinking_stops_at_its_budget_and_says_so() -> None:
    sc, said = Judged(), []
    sc.shrink_budget = 2
    ctx = context(said)
    found = [sc.trial(ctx, Schedule.parse(f"plan:step.start:kill,record:step.start:kill,{FATAL}")),
             sc.trial(ctx, Schedule.parse(f"record:step.start:kill,plan:step.start:term,{FATAL}"))]
    before = len(sc.ran)
    with_shrunk(sc, ctx, found)
    assert len(sc.ran) - before <= 2
    assert any("shrink budget spent" in s for s in said), said


def test_a_negative_controls_findings_are_not_shrunk() -> None:
    sc = Judged()
    sc.expected_finding = True
    ctx = context([])
    found = [sc.trial(ctx, Schedule.parse(f"plan:step.start:kill,{FATAL}"))]
    assert with_shrunk(sc, ctx, found) == found and len(sc.ran) == 1
