"""JUnit XML for CI dashboards, written with junitparser (no string building).

1. One testsuite per scenario (classname: the scenario), one testcase per trial, each with a time: the
   trial's run time; a scenario that did not run (skipped, error, stopped) is one testcase of its own
   name carrying the scenario's time and its reason.
2. A testcase is named by its schedule alone (`crash-free` for none), never by run id or seed, so CI test
   history follows a schedule from one pipeline to the next whatever base seed drew it; a schedule that
   comes again in one scenario (a fleet's runs, a shrunk schedule found again) is `NAME #2`, `#3`, ...
   in trial order (the run id and the seed are in a failing case's block).
3. A failing trial carries its block (`text.trial_block`: evidence, seed, schedule, replay line) in a
   <failure>, an undecided one in an <error>; a negative control's expected finding is a passing case
   marked by a property, its block in <system-out>.
4. Each suite carries the run's seed, killpoint's version and the step module and its digest as
   properties, and what a time budget cut, if anything.
5. A failure of a cause met at several schedules (`report.causes`) that is not the cause's representative
   says so: its message ends `(same cause as SCENARIO [TESTCASE])`, naming the representative's testcase,
   and its text starts with that line; the representative's text ends with where else the cause was met.
6. Every string put into the XML is `xml_text`: ANSI escapes removed, characters XML 1.0 cannot hold
   written as `\\xNN`, so any worker output gives a well-formed file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from junitparser import (
    Error,
    Failure,
    JUnitXml,
    Properties,
    Property,
    Skipped,
    SystemOut,
    TestCase,
    TestSuite,
)

from killpoint import __version__
from killpoint.report.causes import Group
from killpoint.report.text import failure_groups, run_seed, trial_block
from killpoint.run.scenario import ScenarioResult
from killpoint.run.trial import Trial

ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
"""An ANSI escape: a CSI sequence (colours, cursor moves), an OSC sequence (titles, links), or a
two-character escape."""
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""A character XML 1.0 cannot hold, even escaped (most C0 controls, lone surrogates, U+FFFE/U+FFFF)."""


def xml_text(text: str) -> str:
    """Flow step 6: `text` without ANSI escapes, every other character XML cannot hold written as `\\xNN`
    (or `\\uNNNN`), so that it reads the same in a CI dashboard and never breaks the file."""
    return NOT_XML.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}",
                       ANSI.sub("", text))


def testcase_names(trials: list[Trial]) -> list[str]:
    """Flow step 2: a name per trial of one scenario, unique within it: the schedule (`crash-free` for
    none), then ` #2`, ` #3`... for the second and later trials of one schedule, in trial order."""
    seen: dict[str, int] = {}
    out = []
    for t in trials:
        name = str(t.schedule) or "crash-free"
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


def junit_xml(results: list[ScenarioResult], steps: str, meta: dict | None = None) -> str:
    """The JUnit XML document of `results` (see the module docstring), as text."""
    meta = meta or {}
    root = JUnitXml()
    groups = {id(f.ref): g for g in failure_groups(results) for f in g.members}
    names = {id(t): name for r in results for t, name in zip(r.trials, testcase_names(r.trials), strict=True)
             if t.spooled is None}  # a spooled one is rebuilt anew each read (`Trials`) and never a cause
    suites = [_suite(r, steps, meta, lambda t: _grouped(t, groups, names)) for r in results]
    for suite in suites:
        root.add_testsuite(suite)
    root.update_statistics()  # counts; it also sets each suite's time to the sum of its cases' times...
    for suite, r in zip(suites, results, strict=True):
        suite.time = round(r.elapsed, 3)  # ...but a suite's time is its scenario's wall time
    root.time = round(sum(r.elapsed for r in results), 3)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + root.tostring().decode("utf-8") + "\n"


def _grouped(t: Trial, groups: dict[int, Group], names: dict[int, str]) -> tuple[str | None, str | None]:
    """Flow step 5: (the line naming the representative of `t`'s cause, if `t` is not it; where else the
    cause was met, if `t` is its representative)."""
    g = groups.get(id(t))
    if g is None or not g.others:
        return None, None
    rep = g.representative
    if rep.ref is t:
        return None, g.also_line()
    return f"same cause as {rep.scenario} [{names[id(rep.ref)]}]", None


def _suite(r: ScenarioResult, steps: str, meta: dict,
           grouped: Callable[[Trial], tuple[str | None, str | None]]) -> TestSuite:
    """Flow steps 1 and 4: the testsuite of one scenario."""
    suite = TestSuite(xml_text(r.name))
    props = {"killpoint.version": __version__, "killpoint.steps": steps, "killpoint.seed": meta.get("seed"),
             "killpoint.steps_digest": meta.get("steps_digest")}
    if r.outcome == "expected":
        props["killpoint.negative_control"] = "expected finding produced"
    if r.cut:  # what the time budget left out of the random part (never the exhaustive part)
        props["killpoint.budget_cut"] = r.cut
    for name, value in props.items():
        if value is not None:
            suite.add_property(name, xml_text(str(value)))
    cases = []
    if r.outcome == "skipped":
        cases.append(_scenario_case(r, Skipped(xml_text(r.reason))))
    if r.outcome in ("error", "interrupted") or (r.outcome in ("fail", "unknown") and not r.trials):
        cases.append(_scenario_case(r, Error(xml_text(r.reason or r.outcome))))
    base = run_seed(meta)
    cases.extend(_trial_case(r, t, name, steps, base, grouped(t))
                 for t, name in zip(r.trials, testcase_names(r.trials), strict=True))
    suite.add_testcases(cases)
    return suite


def _scenario_case(r: ScenarioResult, result: Skipped | Error) -> TestCase:
    """Flow step 1: the one testcase of a scenario that did not run its trials, with its time."""
    case = TestCase(xml_text(r.name), xml_text(r.name), round(r.elapsed, 3))
    case.append(result)
    return case


def _trial_case(r: ScenarioResult, t: Trial, name: str, steps: str, base: int | None,
                grouped: tuple[str | None, str | None] = (None, None)) -> TestCase:
    """Flow steps 2, 3 and 5: the testcase of one trial."""
    same, also = grouped
    case = TestCase(xml_text(name), xml_text(r.name), round(t.seconds(), 3))
    if t.outcome == "fail" and r.outcome == "expected":
        holder = Properties()
        holder.add_property(Property("killpoint.expected_finding", "true"))
        case.append(holder)
        block = trial_block(r.name, t, steps, "EXPECTED FINDING (negative control)", base)
        case.append(SystemOut(xml_text("\n".join(block))))
    elif t.outcome == "fail":
        first = t.failing()[0]
        failure = Failure(xml_text(f"{first.checker}: {first.reason}" + (f" ({same})" if same else "")))
        block = trial_block(r.name, t, steps, base_seed=base)
        failure.text = xml_text("\n".join(([same] if same else []) + block + ([f"  {also}"] if also else [])))
        case.append(failure)
    elif t.outcome == "unknown":
        error = Error("unknown: the checkers could not decide")
        error.text = xml_text("\n".join(trial_block(r.name, t, steps, "UNKNOWN", base)))
        case.append(error)
    return case

