"""JUnit for CI dashboards: unique testcase names (scenario and schedule), a time per case, the seed, version
and step-module digest as properties, and a negative control's expected finding marked as one."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

from killpoint import __version__
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.faults.schedule import Schedule
from killpoint.report.text import junit_xml
from killpoint.run.events import RunBegin, RunEnd
from killpoint.run.scenario import ScenarioResult
from killpoint.run.trial import Trial

OK = [Verdict("exactly_once", "pass", "ok")]
DUP = [Verdict("exactly_once", "fail", "mailer effect applied twice", ("extra x1: mailer key r:email",))]


def trial(run_id: str, schedule: str, verdicts: list[Verdict], seed: int | None = None, span: float = 0.5) -> Trial:
    events = [RunBegin(t=10.0, run_id=run_id), RunEnd(t=10.0 + span, run_id=run_id)]
    return Trial(run_id, Schedule.parse(schedule), seed, Evidence(run_id, events=events), verdicts)


def suites() -> list[ScenarioResult]:
    crash = [trial("crash-points-1", "email:effect.applied:kill", OK),
             trial("crash-points-2", "email:effect.applied:kill", OK, seed=7),   # a random one, same faults
             trial("crash-points-3", "email:effect.applied:kill", OK)]           # the shrunk one, again
    fleet = [trial(f"fleet-{i}", "", OK) for i in range(1, 13)]
    refusal = [trial(f"rollback-refusal-{i}", "", OK) for i in range(1, 4)]
    control = [trial("non-idempotent-downstream-1", "send:effect.applied:kill", DUP, span=1.25)]
    return [ScenarioResult("crash-points", "pass", crash, 3.0), ScenarioResult("fleet", "pass", fleet, 5.0),
            ScenarioResult("rollback-refusal", "pass", refusal, 1.0),
            ScenarioResult("non-idempotent-downstream", "expected", control, 2.0)]


def parse() -> ET.Element:
    return ET.fromstring(junit_xml(suites(), "my.steps", {"seed": 1234, "steps_digest": "abc123"}))


def test_testcase_names_are_unique_per_suite_and_name_the_schedule() -> None:
    root = parse()
    for suite in root.iter("testsuite"):
        names = [(c.get("classname"), c.get("name")) for c in suite.iter("testcase")]
        assert len(names) == len(set(names)), names
    crash = [c.get("name") for c in root.find("testsuite[@name='crash-points']").iter("testcase")]
    assert crash == ["email:effect.applied:kill [crash-points-1]", "email:effect.applied:kill (seed 7)",
                     "email:effect.applied:kill [crash-points-3]"]
    fleet = [c.get("name") for c in root.find("testsuite[@name='fleet']").iter("testcase")]
    assert len(set(fleet)) == 12 and all(n.startswith("crash-free [fleet-") for n in fleet)


def test_every_case_has_its_time() -> None:
    cases = list(parse().iter("testcase"))
    assert cases and all(c.get("time") is not None for c in cases)
    control = parse().find("testsuite[@name='non-idempotent-downstream']/testcase")
    assert control.get("time") == "1.250"


def test_suites_carry_seed_version_and_digest() -> None:
    for suite in parse().iter("testsuite"):
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        assert props["killpoint.seed"] == "1234" and props["killpoint.version"] == __version__
        assert props["killpoint.steps_digest"] == "abc123" and props["killpoint.steps"] == "my.steps"


def test_a_negative_controls_expected_finding_is_marked_not_a_plain_pass() -> None:
    suite = parse().find("testsuite[@name='non-idempotent-downstream']")
    assert suite.get("failures") == "0"
    assert {p.get("name"): p.get("value") for p in suite.find("properties")}["killpoint.negative_control"]
    case = suite.find("testcase")
    assert case.find("failure") is None
    assert case.find("properties/property[@name='killpoint.expected_finding']").get("value") == "true"
    assert "EXPECTED FINDING (negative control)" in case.find("system-out").text
    assert "extra x1: mailer key r:email" in case.find("system-out").text


def test_an_unknown_trial_is_not_a_plain_pass() -> None:
    result = ScenarioResult("crash-points", "unknown",
                            [trial("crash-points-1", "email:step.start:kill", [Verdict("exactly_once", "unknown", "?")])], 1.0)
    case = ET.fromstring(junit_xml([result], "my.steps")).find("testsuite/testcase")
    assert case.find("error") is not None


def test_a_budget_cut_is_a_suite_property() -> None:
    cut = "random: 3 of 8 schedules, the budget of 60 s ran out"
    result = ScenarioResult("crash-points", "pass",
                            [trial("crash-points-1", "email:step.start:kill", [Verdict("exactly_once", "pass", "ok")])],
                            1.0, cut=cut)
    suite = ET.fromstring(junit_xml([result], "my.steps")).find("testsuite")
    assert {p.get("name"): p.get("value") for p in suite.find("properties")}["killpoint.budget_cut"] == cut
    uncut = ET.fromstring(junit_xml([replace(result, cut="")], "my.steps")).find("testsuite")
    assert "killpoint.budget_cut" not in {p.get("name") for p in uncut.find("properties")}
