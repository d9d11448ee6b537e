"""JUnit for CI dashboards: unique testcase names (scenario and schedule, never a run id or seed), a time
per case (a skipped one too), the seed, version and step-module digest as properties, a negative control's
expected finding marked as one, and a well-formed file whatever a worker printed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

from killpoint import __version__
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.events import RunBegin, RunEnd
from killpoint.faults.schedule import Schedule
from killpoint.report.junit import junit_xml
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
    assert crash == ["email:effect.applied:kill", "email:effect.applied:kill #2", "email:effect.applied:kill #3"]
    fleet = [c.get("name") for c in root.find("testsuite[@name='fleet']").iter("testcase")]
    assert fleet == ["crash-free"] + [f"crash-free #{i}" for i in range(2, 13)]


def test_every_case_has_its_time() -> None:
    cases = list(parse().iter("testcase"))
    assert cases and all(c.get("time") is not None for c in cases)
    control = parse().find("testsuite[@name='non-idempotent-downstream']/testcase")
    assert float(control.get("time")) == 1.25


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


def failing(run_id: str, schedule: str, seed: int | None, evidence: tuple[str, ...]) -> Trial:
    return trial(run_id, schedule, [Verdict("exactly_once", "fail", "mailer effect \x1b[31mapplied\x1b[0m twice",
                                            evidence)], seed=seed)


def test_ansi_escapes_and_control_characters_in_a_failing_trials_evidence_give_well_formed_xml() -> None:
    worker_output = ("Traceback (most recent call last):", "\x1b[1;31mKeyError\x1b[0m: 'phone'\x07\x00",
                     "\x1b]0;title\x07tail \x08\x0b\x0c\x1f \ufffe end", "tab\tand <angle> & \"quotes\"")
    result = ScenarioResult("crash-\x1b[32mpoints", "fail", [failing("crash-points-1", "email:effect.applied:kill",
                                                                     None, worker_output)], 1.0, reason="x\x01")
    text = junit_xml([result], "my.steps", {"seed": 5})
    root = ET.fromstring(text)  # raises ParseError when not well-formed
    case = root.find("testsuite/testcase")
    body, message = case.find("failure").text, case.find("failure").get("message")
    assert "\x1b" not in text and "[31m" not in text and "[1;31m" not in text
    assert message == "exactly_once: mailer effect applied twice"
    assert "KeyError: 'phone'\\x07\\x00" in body  # control characters are shown, not dropped silently
    assert "tail \\x08\\x0b\\x0c\\x1f \\ufffe end" in body and "title" not in body
    assert "tab\tand <angle> & \"quotes\"" in body
    assert root.find("testsuite").get("name") == "crash-points"


def test_a_schedule_has_the_same_testcase_name_whatever_base_seed_drew_it() -> None:
    def names(base_seed: int, trial_seeds: list[int]) -> list[str]:
        trials = [failing(f"crash-points-{i}{base_seed}", s, seed, ("x",))
                  for i, (s, seed) in enumerate(zip(["email:effect.applied:kill,charge:step.start:term",
                                                     "record:step.start:kill"], trial_seeds, strict=True))]
        result = ScenarioResult("crash-points", "fail", trials, 1.0)
        root = ET.fromstring(junit_xml([result], "my.steps", {"command": "run", "seed": base_seed}))
        return [c.get("name") for c in root.iter("testcase")]

    first, second = names(11, [901, 902]), names(22, [77, 78])
    assert first == second == ["email:effect.applied:kill,charge:step.start:term", "record:step.start:kill"]


def test_a_skipped_or_errored_scenario_is_one_case_with_its_time() -> None:
    results = [ScenarioResult("fleet", "skipped", [], 0.25, reason="--shard: all 1 of its trials run in other shards"),
               ScenarioResult("db-crash", "error", [], 0.5, reason="no-postgres: \x1b[1mnone\x1b[0m")]
    root = ET.fromstring(junit_xml(results, "my.steps"))
    skipped = root.find("testsuite[@name='fleet']/testcase")
    assert float(skipped.get("time")) == 0.25 and skipped.find("skipped").get("message").startswith("--shard")
    errored = root.find("testsuite[@name='db-crash']/testcase")
    assert float(errored.get("time")) == 0.5 and errored.find("error").get("message") == "no-postgres: none"
    assert root.find("testsuite[@name='fleet']").get("skipped") == "1"
