"""Checkers: pure functions of (evidence, baseline evidence) -> Verdict, composed by name.

A checker that raises is reported as `unknown` with the exception, never as a crash of the harness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from killpoint.checkers.effects import context_fidelity, exactly_once
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.faults import commits_survive, retries_keep_keys
from killpoint.checkers.outcome import completes, cost_accounted, same_final_state
from killpoint.checkers.process import bounded_rework, drains_on_sigterm, fenced_zombie, no_orphans, no_rewind
from killpoint.checkers.verdict import Verdict, combine, unknown
from killpoint.checkers.versions import migrates_older_version, refuses_newer_version

Checker = Callable[[Evidence, Evidence | None], Verdict]

CHECKERS: dict[str, Checker] = {
    "completes": completes,
    "exactly_once": exactly_once,
    "same_final_state": same_final_state,
    "no_rewind": no_rewind,
    "bounded_rework": bounded_rework,
    "context_fidelity": context_fidelity,
    "cost_accounted": cost_accounted,
    "refuses_newer_version": refuses_newer_version,
    "migrates_older_version": migrates_older_version,
    "drains_on_sigterm": drains_on_sigterm,
    "fenced_zombie": fenced_zombie,
    "no_orphans": no_orphans,
    "commits_survive": commits_survive,
    "retries_keep_keys": retries_keep_keys,
}

CRASH_CHECKERS = ("completes", "exactly_once", "same_final_state", "no_rewind", "bounded_rework",
                  "context_fidelity", "cost_accounted", "drains_on_sigterm", "fenced_zombie", "no_orphans")
"""The checkers every faulted run of a resumable agent must pass."""


def run_checkers(names: Iterable[str], ev: Evidence, base: Evidence | None) -> list[Verdict]:
    """Run the named checkers; one that raises becomes `unknown` naming the exception."""
    out = []
    for name in names:
        try:
            out.append(CHECKERS[name](ev, base))
        except Exception as exc:  # a broken checker must not take the run down with it
            out.append(unknown(name, f"checker raised {type(exc).__name__}: {exc}"))
    return out


__all__ = ["CHECKERS", "CRASH_CHECKERS", "Checker", "Evidence", "Verdict", "combine", "run_checkers"]
