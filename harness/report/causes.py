"""Failures grouped by cause: one bug met at many schedules in many scenarios is one finding, shown once.

Pure: it reads findings (a trial's scenario, run id, schedule, outcome and first non-passing verdict), made
from `Trial`s (the CLI, JUnit) or from verdicts.json's records (the HTML report, `killpoint merge`).

1. A finding's cause is (title, checker, step, evidence signature): the title keeps a negative control's
   expected finding apart from a real failure; the checker is its first non-passing verdict's; the step is
   the step of its schedule's last fault (the one nearest the failure; none for an empty schedule); the
   signature is that verdict's first evidence line (its reason when there is none) with what differs from
   one run to the next written as placeholders: the trial's own run id and any other run id as `<run>`,
   keys (`key=...`, but `key=None`) as `<key>`, long hex digests as `<hex>`, numbers (seeds, counts, times) as `N`.
2. Findings of one cause form a group, in the order their first member came.
3. A group's representative is its real failure (before an undecided one) with the fewest faults, a shrunk
   or remembered schedule (one replayed from `.killpoint/failures`) before a freshly drawn one of as many
   faults, then the first met: the one shown in full. So a remembered failure keeps its replay line from
   one run to the next, even when a random trial of the run shrinks to another schedule as short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from killpoint.run.trial import Trial

RUN_ID = re.compile(r"\b[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*-\d+(?:\.gw\d+)?\b")
"""A run id as `Session.next_run_id` names it: `crash-points-15`, `zombie-worker-3.gw1`."""
KEY = re.compile(r"\bkey=(?!None\b)(\S+)")
"""A key named in evidence (`key=None`, no key at all, is kept: it is often the bug)."""
HEX = re.compile(r"(?<![0-9a-f])(?=[0-9]*[a-f])[0-9a-f]{8,}(?![0-9a-f])")
"""A digest or a generated id's tail (`ch_0dd6380910df72f05dca`): eight or more hex digits, one a letter at
least (all digits is a number)."""
NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Finding:
    """One non-passing trial, as much of it as grouping needs. `ref` is what it was made from (a `Trial` or
    a verdicts.json record), handed back untouched."""

    scenario: str
    run_id: str
    schedule: str
    outcome: str
    checker: str
    first_line: str
    title: str = "FAILED"
    shrunk: bool = False
    """Shrunk, or remembered from an earlier run: as minimal as killpoint knows how to make it."""
    ref: object = field(default=None, compare=False, repr=False)

    @property
    def faults(self) -> int:
        return len([f for f in self.schedule.split(",") if f.strip()])

    @property
    def step(self) -> str:
        """Flow step 1: the step of the schedule's last fault, or "" for an empty schedule."""
        faults = [f.strip() for f in self.schedule.split(",") if f.strip()]
        return faults[-1].split(":", 1)[0] if faults else ""


def signature(line: str, run_id: str = "") -> str:
    """Flow step 1: `line` with what differs from one run of one bug to the next written as placeholders."""
    if run_id:
        line = line.replace(run_id, "<run>")
    line = RUN_ID.sub("<run>", line)
    line = KEY.sub("key=<key>", line)
    line = HEX.sub("<hex>", line)
    return " ".join(NUMBER.sub("N", line).split())


def cause(f: Finding) -> tuple[str, str, str, str]:
    """Flow step 1: what findings of one bug share."""
    return f.title, f.checker, f.step, signature(f.first_line, f.run_id)


@dataclass
class Group:
    """The findings of one cause: `representative` is shown in full, `others` (in the order met) counted."""

    representative: Finding
    others: list[Finding]

    @property
    def members(self) -> list[Finding]:
        return [self.representative, *self.others]

    def also_line(self) -> str | None:
        """`also at N schedules in scenarios a (2), b (1)`, or None when the representative is alone."""
        if not self.others:
            return None
        counts: dict[str, int] = {}
        for f in self.others:
            counts[f.scenario] = counts.get(f.scenario, 0) + 1
        where = ", ".join(f"{name} ({n})" for name, n in counts.items())
        n = len(self.others)
        return (f"also at {n} schedule{'s' if n != 1 else ''} in scenario{'s' if len(counts) != 1 else ''} {where}"
                " (the same checker, step and evidence)")


def _rank(f: Finding, order: int) -> tuple[bool, int, bool, int]:
    return f.outcome != "fail", f.faults, not f.shrunk, order


def group(findings: Iterable[Finding]) -> list[Group]:
    """Flow steps 2 and 3: the findings grouped by cause, groups in the order their first member came."""
    by_cause: dict[tuple[str, str, str, str], list[tuple[int, Finding]]] = {}
    for i, f in enumerate(findings):
        by_cause.setdefault(cause(f), []).append((i, f))
    groups = []
    for members in by_cause.values():
        rep = min(members, key=lambda m: _rank(m[1], m[0]))
        groups.append(Group(rep[1], [f for i, f in members if i != rep[0]]))
    return groups


def from_record(scenario: str, scenario_outcome: str, trial: dict) -> Finding:
    """A finding from one of verdicts.json's trial records (a non-passing one)."""
    bad = [v for v in trial.get("verdicts", []) if isinstance(v, dict) and v.get("outcome") not in ("pass", "n/a")]
    first = next((v for v in bad if v.get("outcome") == "fail"), bad[0] if bad else {})
    evidence = first.get("evidence") or []
    line = str(evidence[0]) if evidence else str(first.get("reason", ""))
    return Finding(scenario, str(trial.get("run_id", "")), str(trial.get("schedule") or ""), str(trial.get("outcome")),
                   str(first.get("checker", "")), line, _title(scenario_outcome, str(trial.get("outcome"))),
                   bool(trial.get("shrunk_from") or trial.get("remembered")), ref=trial)


def from_trial(scenario: str, scenario_outcome: str, t: Trial) -> Finding:
    """A finding from a non-passing `Trial` (`ref` is the trial)."""
    bad = [v for v in t.verdicts if v.outcome not in ("pass", "n/a")]
    first = next((v for v in bad if v.outcome == "fail"), bad[0] if bad else None)
    line = "" if first is None else (first.evidence[0] if first.evidence else first.reason)
    return Finding(scenario, t.run_id, str(t.schedule), t.outcome, first.checker if first else "", line,
                   _title(scenario_outcome, t.outcome), t.shrunk_from is not None or t.remembered, ref=t)


def _title(scenario_outcome: str, outcome: str) -> str:
    return "EXPECTED FINDING" if scenario_outcome == "expected" else outcome.upper()
