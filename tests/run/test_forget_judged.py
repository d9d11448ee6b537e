"""A CLI session forgets each run once it is judged (`Session.forget_judged`), so a long exploration's memory
stays flat: the fake services drop the run's records, the history's memory its events (its file keeps them),
and a passing trial its raw evidence (or, in a scenario that reads no passing trial's evidence, all of it but
its outcome and schedule: its verdicts go to the session's spool, `Trial.spool`). What the user is told must
not change: the same schedules give the same verdicts.json records, unfired faults, run times and scenario
figures with and without forgetting, read from the trials, from a `Trials` holding them (a spooled one as
its place in the spool) and from the session's own list."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.report.text import trial_record
from killpoint.run.scenario import Context, find
from killpoint.run.trial import Trial, Trials
from tests.helpers.harness import harness_session

SCHEDULES = {
    "crash-points": ["charge:effect.applied:kill", "email:checkpoint.writing:term,record:step.start:kill"],
    "flaky-services": ["charge:effect.received:error", "email:effect.applied:drop"],
    "zombie-worker": ["email:step.start:stop"],
}
"""Scenarios whose figures read the trials' evidence (faults, attempts' outcomes, incarnations' ends)."""


def told(trials: Iterable[Trial]) -> list[tuple]:
    """What the end of a session tells of `trials` (their verdicts' details aside: they name timings)."""
    return [(t.outcome, [(v["checker"], v["outcome"]) for v in record["verdicts"]],
             {k: v for k, v in record.items() if k != "verdicts"}, t.unfired(), t.seconds() > 0)
            for t, record in ((t, trial_record(t)) for t in trials)]


def judged(pg_server: PostgresHandle, tmp_path: Path, forget: bool) -> dict[str, tuple[list, str]]:
    out: dict = {}
    every: list[Trial] = []
    with harness_session(pg_server, tmp_path / f"runs-{forget}", f"forget_judged_{forget}".lower()) as s:
        s.forget_judged = forget
        for name, schedules in SCHEDULES.items():
            scenario, ctx = find(name), Context(session=s)
            trials = [scenario.trial(ctx, Schedule.parse(text, s.agent.steps)) for text in schedules]
            every += trials
            held = Trials(trials)  # what run_plan and with_shrunk keep: a spooled trial as its place
            assert held == trials and told(held) == told(trials) and scenario.figures(held) == scenario.figures(trials)
            assert [u is t for u, t in zip(held, trials, strict=True)] == [t.spooled is None for t in trials]
            out[name] = (told(trials), scenario.figures(trials))
            for t in trials:
                held = s.env.services.attempts(t.run_id), s.history.of_run(t.run_id)
                assert (held == ([], [])) == forget, (t, held)
                assert (t.evidence.final is None) == (forget and t.outcome == "pass"), t
                assert (t.spooled is not None) == (forget and t.outcome == "pass" and scenario.spools()), t
                if t.spooled is None:
                    assert t.evidence.events and t.evidence.incarnations  # what figures and reports read is kept
        assert [t.run_id for t in s.trials] == [t.run_id for t in every]  # the session's trials, in order
        out["session"] = told(s.trials)
        assert s.history.events() == [] or not forget or all(e.run_id is None or e.run_id.startswith("baseline")
                                                             for e in s.history.events())
    return out


def test_forgetting_judged_runs_changes_no_verdict_and_no_figure(pg_server: PostgresHandle, tmp_path: Path) -> None:
    kept, forgotten = judged(pg_server, tmp_path, False), judged(pg_server, tmp_path, True)
    assert forgotten == kept
    assert all(outcome == "pass" and timed for name in SCHEDULES for outcome, _, _, _, timed in kept[name][0]), kept
    assert kept["session"] == [told for name in SCHEDULES for told in kept[name][0]]
    assert kept["crash-points"][0][1][2]["schedule"] == "email:checkpoint.writing:term,record:step.start:kill"
