"""Three-valued verdicts: pass, fail, unknown (never counted as a pass), and `n/a`: a checker whose evidence
is absent for this agent (no model requests to compare, say) does not decide the run either way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["pass", "fail", "unknown", "n/a"]


@dataclass(frozen=True)
class Verdict:
    """What one checker concluded, why, and the few lines of evidence behind it."""

    checker: str
    outcome: Outcome
    reason: str
    evidence: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"checker": self.checker, "outcome": self.outcome, "reason": self.reason,
                "evidence": list(self.evidence)}


def passed(checker: str, reason: str = "ok") -> Verdict:
    return Verdict(checker, "pass", reason)


def failed(checker: str, reason: str, evidence: list[str] | tuple[str, ...] = ()) -> Verdict:
    return Verdict(checker, "fail", reason, tuple(evidence[:8]))


def unknown(checker: str, reason: str) -> Verdict:
    return Verdict(checker, "unknown", reason)


def not_applicable(checker: str, reason: str) -> Verdict:
    return Verdict(checker, "n/a", reason)


def combine(verdicts: list[Verdict]) -> Outcome:
    """fail if any failed; else unknown if any could not decide; else pass. `n/a` verdicts do not count;
    a list with nothing but them (or nothing) is unknown."""
    verdicts = [v for v in verdicts if v.outcome != "n/a"]
    if any(v.outcome == "fail" for v in verdicts):
        return "fail"
    if not verdicts or any(v.outcome == "unknown" for v in verdicts):
        return "unknown"
    return "pass"
