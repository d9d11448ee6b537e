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


def test_a_candidate_the_scenario_judged_already_is_not_run_again() -> None:
    """The sweep ran FATAL alone and it failed: a random failure holding it shrinks to it without running it
    (or any candidate judged before) again, and adds no second trial of it."""
    sc, said = Judged(), []
    ctx = context(said)
    swept = [sc.trial(ctx, Schedule.parse(s)) for s in (FATAL, "plan:step.start:kill", "record:step.start:term")]
    found = [sc.trial(ctx, Schedule.parse(f"plan:step.start:kill,{FATAL},record:step.start:term")),
             sc.trial(ctx, Schedule.parse(f"record:step.start:term,{FATAL}"))]
    before = len(sc.ran)
    out = with_shrunk(sc, ctx, [*swept, *found])
    ran = sc.ran[before:]
    assert FATAL not in ran and len(ran) == len(set(ran)), ran  # nothing judged twice
    assert list(out) == [*swept, *found]  # the shrunk schedule's trial is the sweep's, shown once
    assert any(line.startswith("judged: shrunk plan:step.start:kill,") and line.endswith(
        f"(3 faults) to {FATAL} (1 fault) in 1 trial; {FATAL} was judged already (judged-1)") for line in said), said


def test_two_failures_share_what_their_searches_judged() -> None:
    sc, said = Judged(), []
    ctx = context(said)
    found = [sc.trial(ctx, Schedule.parse(f"plan:step.start:kill,{FATAL},record:step.start:term")),
             sc.trial(ctx, Schedule.parse(f"plan:step.start:kill,{FATAL},record:step.start:kill"))]
    before = len(sc.ran)
    out = with_shrunk(sc, ctx, found)
    ran = sc.ran[before:]
    assert len(ran) == len(set(ran)) and ran.count(f"{FATAL}") == 1, ran
    assert [(str(t.schedule), str(t.shrunk_from)) for t in out[len(found):]] == [(FATAL, str(found[0].schedule))]
    assert f"record:step.start:kill (3 faults) to {FATAL} (1 fault) in 2 trials; {FATAL} was judged already" \
        in " ".join(said), said  # its own two candidates, then the first search's trial of FATAL


def test_where_the_seed_varies_a_trial_each_search_runs_its_candidates() -> None:
    """A scenario whose trials are not functions of their schedules (`judged_once` False) judges nothing
    from another trial: each search runs every candidate it tries, as before."""
    sc, said = Judged(), []
    sc.judged_once = False
    ctx = context(said)
    swept = [sc.trial(ctx, Schedule.parse(FATAL))]
    found = [sc.trial(ctx, Schedule.parse(f"plan:step.start:kill,{FATAL}"))]
    before = len(sc.ran)
    out = with_shrunk(sc, ctx, [*swept, *found])
    assert FATAL in sc.ran[before:]
    assert [(str(t.schedule), str(t.shrunk_from)) for t in out[2:]] == [(FATAL, str(found[0].schedule))]
