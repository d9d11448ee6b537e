"""A CLI session spools a passing trial once it is judged (`Trial.spool`, `run.spool`): it keeps its run id,
schedule, seed, outcome, run time and unfired faults, its verdicts and notes go to an unnamed file. What the
user is given at the end must not change: `verdicts.json` byte for byte, the JUnit XML, the summary line, the
unfired-faults note and the failure blocks. Only scenarios whose figures (and trial method) read no passing
trial's evidence spool (`Scenario.spools`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.events import RunBegin, RunEnd
from killpoint.faults.schedule import Schedule
from killpoint.report.junit import junit_xml
from killpoint.report.text import failure_blocks, scenario_line, write_run_dir
from killpoint.run.scenario import Scenario, ScenarioResult, find
from killpoint.run.spool import Spool
from killpoint.run.trial import Trial, Trials

OK = [Verdict("exactly_once", "pass", "ok"), Verdict("no_rewind", "n/a", "no checkpoint", ("line", "é \x1b[1m"))]
DUP = [Verdict("exactly_once", "fail", "mailer effect applied twice", ("extra x1: mailer key r:email",))]


def trial(n: int, schedule: str, verdicts: list[Verdict], *, unfired: list[str] | None = None,
          notes: list[str] | None = None, remembered: bool = False) -> Trial:
    run_id = f"crash-points-{n}"
    events = [RunBegin(t=10.0, run_id=run_id), RunEnd(t=10.0 + n / 8, run_id=run_id, unfired=unfired)]
    t = Trial(run_id, Schedule.parse(schedule), 100 + n, Evidence(run_id, events=events, notes=notes or []),
              verdicts, steps="killpoint.reference_agent.invoice_agent")
    t.remembered = remembered
    return t


def results() -> list[ScenarioResult]:
    trials = [trial(1, "email:effect.applied:kill", OK, remembered=True),
              trial(2, "charge:step.start:term,email:effect.applied:kill", OK, unfired=["email:effect.applied:kill"]),
              trial(3, "record:checkpoint.writing:kill", DUP, notes=["the runtime retried"]),
              trial(4, "charge:effect.received:kill", OK, notes=["resumed from seq 2"]),
              trial(5, "email:effect.applied:kill", OK)]
    return [ScenarioResult("crash-points", "fail", trials, 3.25, figures="", cut="random: 5 of 9")]


def everything(tmp: Path, rs: list[ScenarioResult]) -> tuple[bytes, str, list[str], list[str]]:
    """What the end of a CLI command gives the user from `rs`."""
    tmp.mkdir()
    write_run_dir(tmp, rs, {"command": "explore", "seed": 1})
    blocks, first = failure_blocks(rs, "killpoint.reference_agent.invoice_agent", 1, "see verdicts.json")
    unfired = sorted({u for r in rs for t in r.trials for u in t.unfired()})
    return ((tmp / "verdicts.json").read_bytes(), junit_xml(rs, "killpoint.reference_agent.invoice_agent",
                                                            {"seed": 1, "command": "explore"}),
            [scenario_line(r) for r in rs] + blocks + [str(first)], unfired)


def test_spooled_passing_trials_give_the_same_verdicts_json_junit_and_summary(tmp_path: Path) -> None:
    kept, spooled = results(), results()
    spool = Spool(tmp_path)
    for t in spooled[0].trials:
        if t.outcome == "pass":
            t.spool(spool)
    assert [t.spooled is not None for t in spooled[0].trials] == [True, True, False, True, True]
    assert all(t.verdicts == [] and t.evidence.events == [] for t in spooled[0].trials if t.spooled)
    before, after = everything(tmp_path / "kept", kept), everything(tmp_path / "spooled", spooled)
    assert after == before
    records = json.loads(before[0])[0]["trials"]
    assert records[0]["remembered"] is True and records[3]["notes"] == ["resumed from seq 2"]  # what must survive
    assert before[3] == ["email:effect.applied:kill"] and 'time="0.625"' in before[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "spooled"]  # the spool is unnamed: nothing left


def spooled_results(spool: Spool) -> tuple[list[Trial], list[ScenarioResult]]:
    """`results()`, each passing trial spooled, the scenario's trials held in a `Trials`; and the trials."""
    rs = results()
    trials = list(rs[0].trials)
    for t in trials:
        if t.outcome == "pass":
            t.spool(spool)
    rs[0].trials = Trials(trials)
    return trials, rs


def test_trials_held_as_places_in_the_spool_give_the_same_verdicts_json_junit_and_summary(tmp_path: Path) -> None:
    """`Trials` (what `run_plan` and `with_shrunk` keep) holds a spooled passing trial as its place in the
    spool and rebuilds it when read: a new object, equal to it, and the same end for the user. A remembered
    one and a failing one are held whole (the same object)."""
    trials, rs = spooled_results(Spool(tmp_path))
    held = rs[0].trials
    assert [u is t for u, t in zip(held, trials, strict=True)] == [True, False, True, False, False]
    assert held == trials and held[-1] == trials[-1] and held[:-1] == trials[:-1] and held[-5] is trials[0]
    assert everything(tmp_path / "held", rs) == everything(tmp_path / "kept", results())
    both = [trials[2]] + held + Trials([trials[2]])
    assert isinstance(both, Trials) and both == [trials[2], *trials, trials[2]]
    with pytest.raises(IndexError):
        held[5]


def test_a_trial_appended_before_it_was_spooled_is_settled_into_its_place(tmp_path: Path) -> None:
    """The session's own list takes a trial when it is judged, before it is spooled (`Session.forget`)."""
    spool, t, other = Spool(tmp_path), trial(2, "charge:step.start:term", OK, unfired=["x:step.start:kill"]), trial(
        3, "record:checkpoint.writing:kill", DUP)
    held = Trials([other, t])
    t.spool(spool)
    held.settle(t)
    held.settle(other)  # a failing trial is never spooled: it stays whole
    assert held[1] is not t and held[1] == t and held[0] is other
    assert (held[1].unfired(), held[1].seconds(), held[1].written()) == (t.unfired(), t.seconds(), t.written())


def test_trials_judged_at_the_same_time_are_each_held_once(tmp_path: Path) -> None:
    """Under `-j` the session's `Trials` takes trials from several threads (judged, then settled once
    spooled): none is lost or held twice, and each kept one reads back as itself."""
    import threading

    spool, held, start = Spool(tmp_path), Trials(), threading.Barrier(4)
    made: list[list[Trial]] = [[trial(100 * k + n, "charge:step.start:term", OK if n % 3 else DUP)
                                for n in range(100)] for k in range(4)]

    def judge(mine: list[Trial]) -> None:
        start.wait()
        for t in mine:
            held.append(t)
            if t.outcome == "pass":
                t.spool(spool)
                held.settle(t)

    threads = [threading.Thread(target=judge, args=(mine,)) for mine in made]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    everyone = {t.run_id: t for mine in made for t in mine}
    assert sorted(t.run_id for t in held) == sorted(everyone)
    assert all((t is everyone[t.run_id]) == (t.outcome == "fail") and t == everyone[t.run_id] for t in held)


def test_a_spooled_trial_in_trials_costs_a_few_bytes_not_the_trial(tmp_path: Path) -> None:
    """2,000 spooled passing trials held in a `Trials` keep under 32 bytes each in memory (a list of the
    spooled trials themselves: ~400 bytes each)."""
    import gc
    import tracemalloc

    spool = Spool(tmp_path)
    spool.add({})  # the spool's buffers, allocated once
    held = Trials()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for n in range(2000):
            t = trial(n, "charge:step.start:term,email:effect.applied:kill", OK, notes=[f"note {n}"])
            t.spool(spool)
            held.append(t)
        del t
        gc.collect()
        grown = sum(d.size_diff for d in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert len(held) == 2000 and held[1999].written()[1] == ["note 1999"]
    assert grown < 32 * 2000, grown


@pytest.mark.parametrize("shape", ["none", "empty-scenario", "several"])
def test_verdicts_json_written_trial_by_trial_is_what_json_dumps_gives(tmp_path: Path, shape: str) -> None:
    """`write_run_dir` writes one trial record at a time: the same bytes as `json.dumps(..., indent=2)` of the
    whole list, which `killpoint report`, `merge` and the HTML report read."""
    rs = {"none": [], "empty-scenario": [ScenarioResult("fleet", "skipped", [], 0.5, reason="no \"docker\"\n")],
          "several": [*results(), ScenarioResult("fleet", "skipped", [], 0.5, reason="é"), *results()]}[shape]
    write_run_dir(tmp_path, rs, {})
    text = (tmp_path / "verdicts.json").read_text()
    assert text == json.dumps(json.loads(text), indent=2)
    assert [len(r["trials"]) for r in json.loads(text)] == [len(r.trials) for r in rs]


def test_the_spool_gives_back_each_record_where_it_was_written(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    offsets = [spool.add({"n": n, "text": "x" * n}) for n in range(50)]
    assert [spool.read(o)["n"] for o in reversed(offsets)] == list(reversed(range(50)))
    spool.close()


class OwnFigures(Scenario):
    name = "own-figures"

    def figures(self, trials: list[Trial]) -> str:
        return f"{sum(len(t.evidence.events) for t in trials)} events"


class OwnTrial(Scenario):
    name = "own-trial"

    def trial(self, ctx, schedule, seed=None, run_id=None):  # noqa: ANN001, ANN201 - the base's signature
        return super().trial(ctx, schedule, seed, run_id)


class OnlyActions(Scenario):
    """Looks like one that reads evidence (a subclass with its own settings), but its figures are the base's."""

    name = "only-actions"
    actions = ("kill",)


@pytest.mark.parametrize(("scenario", "spools"), [
    (find("crash-points"), True), (OnlyActions(), True),
    (find("flaky-services"), False), (find("zombie-worker"), False), (OwnFigures(), False), (OwnTrial(), False)])
def test_only_a_scenario_that_reads_no_passing_trials_evidence_spools(scenario: Scenario, spools: bool) -> None:
    assert scenario.spools() is spools
