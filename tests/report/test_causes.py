"""Failures grouped by cause: one bug met at many schedules in several scenarios prints one block (its
shrunk, fewest-fault schedule) and where else it was met, in the CLI, the HTML report and JUnit.

The trials are those of the gallery agent whose email step sends with no idempotency key
(tests.gallery.variants.no_email_key): every schedule that kills the email step after the mail went out
sends it twice, and exactly_once's first evidence line names the run, so only run ids, keys and numbers
differ from one trial to the next.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.cli.commands import finish
from killpoint.cli.config import Invocation
from killpoint.faults.schedule import Schedule
from killpoint.report.causes import Finding, from_record, group, signature
from killpoint.report.html import draw
from killpoint.report.text import write_run_dir
from killpoint.run.config import SessionConfig
from killpoint.run.options import RunOptions
from killpoint.run.scenario import ScenarioResult
from killpoint.run.trial import Trial


def mail_twice(run_id: str, schedule: str, seed: int | None, shrunk_from: str | None = None) -> Trial:
    """A trial of the no-email-key agent: the mail of `run_id` applied twice."""
    line = (f'extra x1: mailer key=None {{"body": "invoice for {run_id}", "to": "c@{run_id}.test"}} -- a duplicate: '
            f"the same payload as key=k-{seed or 7}-{run_id}, sent again under no key")
    verdicts = [Verdict("completes", "pass", "ok"), Verdict("exactly_once", "fail", "effects done twice", (line,))]
    return Trial(run_id, Schedule.parse(schedule), seed, Evidence(run_id), verdicts,
                 shrunk_from=Schedule.parse(shrunk_from) if shrunk_from else None)


def other_bug(run_id: str) -> Trial:
    return Trial(run_id, Schedule.parse("plan:step.start:kill"), None, Evidence(run_id),
                 [Verdict("no_rewind", "fail", "checkpoint went back from seq 4 to 2", ("seq 4 -> 2",))])


def results() -> list[ScenarioResult]:
    return [
        ScenarioResult("crash-points", "fail", [
            mail_twice("crash-points-1", "email:effect.applied:kill", None),
            mail_twice("crash-points-7", "charge:step.start:kill,email:effect.applied:kill", 62330349145229),
            other_bug("crash-points-9")], 3.0),
        ScenarioResult("random-faults", "fail", [
            mail_twice("random-faults-2", "plan:checkpoint.committed:term,email:effect.applied:kill", 11),
            mail_twice("random-faults-5", "email:effect.applied:kill", 12,
                       shrunk_from="plan:checkpoint.committed:term,email:effect.applied:kill")], 2.0),
        ScenarioResult("zombie-worker", "fail", [mail_twice("zombie-worker-3.gw1", "email:effect.applied:kill", 4)], 1.0),
    ]


def session(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(agent=SimpleNamespace(module="my.steps", digest="abc"), options=RunOptions(), skip_checkers=frozenset(),
                           env=SimpleNamespace(run_dir=tmp_path, worker_cmd=None, adapter=SimpleNamespace(name="checkpoints")))


def test_a_signature_forgets_run_ids_keys_seeds_and_numbers() -> None:
    a = signature("extra x1: mailer key=k-9-crash-points-3 {\"to\": \"crash-points-3\"} seed 62330349145229", "crash-points-3")
    b = signature("extra x2: mailer key=zz {\"to\": \"zombie-worker-12.gw1\"} seed 5 digest 9f86d081884c7d65")
    assert a == 'extra xN: mailer key=<key> {"to": "<run>"} seed N'
    assert b == 'extra xN: mailer key=<key> {"to": "<run>"} seed N digest <hex>'


def test_the_representative_is_the_real_failure_with_fewest_faults_a_shrunk_one_first() -> None:
    f = [Finding("a", "a-1", "x:step.start:kill,email:effect.applied:kill", "fail", "exactly_once", "dup a-1"),
         Finding("b", "b-1", "email:effect.applied:kill", "unknown", "exactly_once", "dup b-1"),
         Finding("c", "c-1", "email:effect.applied:kill", "fail", "exactly_once", "dup c-1"),
         Finding("d", "d-1", "email:effect.applied:term", "fail", "exactly_once", "dup d-1", shrunk=True)]
    (g,) = group(f)
    assert g.representative.run_id == "d-1"
    assert [x.run_id for x in g.others] == ["a-1", "b-1", "c-1"]  # in the order met
    assert g.also_line() == "also at 3 schedules in scenarios a (1), b (1), c (1) (the same checker, step and evidence)"


def test_a_remembered_failure_stays_the_representative_against_a_fresh_one_as_short() -> None:
    """A schedule replayed from .killpoint/failures keeps its replay line from run to run: a random trial of
    the same run that shrinks to another one-fault schedule of the same cause is counted, not shown."""
    remembered = from_record("crash-points", "fail", {"run_id": "crash-points-1", "schedule": "email:effect.applied:kill",
                                                      "outcome": "fail", "remembered": True, "verdicts": [
                                                          {"checker": "exactly_once", "outcome": "fail",
                                                           "evidence": ["extra x1: mailer key=None"]}]})
    fresh = from_record("crash-points", "fail", {"run_id": "crash-points-7", "schedule": "email:checkpoint.writing:kill",
                                                 "outcome": "fail", "shrunk_from": "a:b:kill,email:checkpoint.writing:kill",
                                                 "verdicts": [{"checker": "exactly_once", "outcome": "fail",
                                                               "evidence": ["extra x1: mailer key=None"]}]})
    (g,) = group([remembered, fresh])
    assert g.representative.run_id == "crash-points-1"
    (g,) = group([fresh, remembered])  # met second, it is still as minimal: the first met wins the tie
    assert g.representative.run_id == "crash-points-7"


def test_one_bug_in_several_scenarios_prints_one_group_with_its_count(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    inv = Invocation(SessionConfig("my.steps", tmp_path), junit=str(tmp_path / "junit.xml"), quiet=True)
    assert finish(inv, session(tmp_path), results(), {"command": "run", "seed": 42}) == 1  # type: ignore[arg-type]
    out = capsys.readouterr().out
    blocks = [b for b in re.split(r"\n(?=--- )", out) if b.startswith("--- ")]
    assert len(blocks) == 2, out  # the mail sent twice, and the other bug
    mail = next(b for b in blocks if "exactly_once" in b)
    assert mail.startswith("--- FAIL: random-faults run random-faults-5"), mail  # shrunk to one fault
    assert "  also at 4 schedules in scenarios crash-points (2), random-faults (1), zombie-worker (1)" in mail
    assert "no_rewind" not in mail and "also at" not in next(b for b in blocks if "no_rewind" in b)
    assert "reproduce the first failure with:\n  killpoint replay --scenario random-faults --schedule " \
           "'email:effect.applied:kill'" in out

    cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    assert len(cases) == 6  # every trial keeps its testcase
    rep = cases[("random-faults", "email:effect.applied:kill")].find("failure")
    assert rep is not None and "also at 4 schedules" in (rep.text or "")
    for key in [("crash-points", "email:effect.applied:kill"), ("zombie-worker", "email:effect.applied:kill"),
                ("random-faults", "plan:checkpoint.committed:term,email:effect.applied:kill")]:
        failure = cases[key].find("failure")
        assert failure is not None
        assert failure.get("message", "").endswith("(same cause as random-faults [email:effect.applied:kill])"), key
        assert (failure.text or "").startswith("same cause as random-faults [email:effect.applied:kill]")
    lone = cases[("crash-points", "plan:step.start:kill")].find("failure")
    assert lone is not None and "same cause" not in lone.get("message", "")


def test_the_html_report_shows_one_failure_section_per_cause(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("")
    write_run_dir(tmp_path, results(), {"steps": "my.steps"})
    page = draw(tmp_path)[0].read_text()
    assert page.count("<section class=failure") == 2, page
    assert "<h2>Failures (6 runs, 2 causes)</h2>" in page
    also = re.search(r"<p class=also>also at 4 schedules in scenarios ([^<]*)(.*?)</p>", page)
    assert also is not None, page
    for run_id in ("crash-points-1", "crash-points-7", "random-faults-2", "zombie-worker-3.gw1"):
        assert f"href='#run-{run_id}'" in also.group(2)
