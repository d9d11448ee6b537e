"""Checkers: pure functions of (evidence, baseline evidence) -> Verdict, composed by name.

A checker is named by a string: a key of `CHECKERS`, or `module:function` for a scenario's own checker
(so `killpoint judge` can find it again from the history). A checker that raises is reported as
`unknown` with the exception, never as a crash of the harness.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from killpoint.checkers.context import context_fidelity
from killpoint.checkers.decisions import decisions_hold
from killpoint.checkers.effects import exactly_once
from killpoint.checkers.egress import blocked, no_egress
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.faults import commits_survive, faults_injected, retries_keep_keys
from killpoint.checkers.invariants import invariants_hold, same_as_serial
from killpoint.checkers.outcome import completes, cost_accounted, hung, same_final_state
from killpoint.checkers.process import bounded_rework, drains_on_sigterm, fenced_zombie, no_orphans, no_rewind
from killpoint.checkers.refused import refused
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
    "faults_injected": faults_injected,
    "no_egress": no_egress,
    "decisions_hold": decisions_hold,
    "invariants_hold": invariants_hold,
    "same_as_serial": same_as_serial,
}

ALWAYS = ("faults_injected",)
"""Checkers every trial is judged by, whatever its scenario asks for."""


def always(ev: Evidence) -> tuple[str, ...]:
    """The checkers `ev` is judged by whatever its scenario asks for: `ALWAYS`, and `no_egress` when a
    worker tried to reach a host off the machine (only then, so an ordinary run's verdicts stay as they were)."""
    return (*ALWAYS, "no_egress") if blocked(ev) else ALWAYS

CRASH_CHECKERS = ("completes", "exactly_once", "same_final_state", "no_rewind", "bounded_rework",
                  "context_fidelity", "cost_accounted", "drains_on_sigterm", "fenced_zombie", "no_orphans")
"""The checkers every faulted run of a resumable agent must pass."""


CheckerRef = str | Checker
"""A checker by name (a key of CHECKERS, or `module:function`), or the function itself."""


def ref(checker: CheckerRef) -> str:
    """The name a checker is recorded under in the history."""
    if isinstance(checker, str):
        return checker
    for name, fn in CHECKERS.items():
        if fn is checker:
            return name
    return f"{checker.__module__}:{checker.__qualname__}"


def resolve(name: str) -> Checker:
    """The checker a name stands for; KeyError if there is none."""
    if name in CHECKERS:
        return CHECKERS[name]
    module, _, attr = name.partition(":")
    if not attr:
        raise KeyError(f"no checker named {name!r}")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[return-value]


def run_checkers(checkers: Iterable[CheckerRef], ev: Evidence, base: Evidence | None) -> list[Verdict]:
    """Run the checkers; one that raises (or cannot be found) becomes `unknown` naming the exception. If the
    run hung (`outcome.hung`), every verdict but `completes` is `unknown`: the run never finished. If the
    database refused a worker a connection for want of slots (`refused.refused`), every `fail` is `unknown`."""
    out = []
    for checker in checkers:
        name = ref(checker)
        short = name.rpartition(":")[2]
        try:
            fn = checker if callable(checker) else resolve(checker)
            out.append(fn(ev, base))
        except Exception as exc:  # a broken checker must not take the run down with it
            out.append(unknown(short, f"checker raised {type(exc).__name__}: {exc}"))
    if hung(ev):  # a run that hung did not finish: only `completes` (which names the hang) judges it
        out = [v if v.checker == "completes" else
               unknown(v.checker, "the run hung (see completes): not judged as if it had finished")
               for v in out]
    why = refused(ev)
    failed = [v.checker for v in out if v.outcome == "fail"]
    if why and failed:  # the environment ended a worker: a failure may be its doing, not the agent's
        out = [v if v.outcome != "fail" else unknown(v.checker, why if v.checker == failed[0] else
                                                     f"{why.split(' (', 1)[0]} (see {failed[0]})") for v in out]
    return out


__all__ = ["ALWAYS", "always", "CHECKERS", "CRASH_CHECKERS", "Checker", "CheckerRef", "Evidence", "Verdict", "combine", "ref",
           "resolve", "run_checkers"]
