"""Checkers of what particular faults must leave behind: commits_survive (db-crash) and
retries_keep_keys (service faults)."""

from __future__ import annotations

from killpoint.checkers.evidence import MIN_ALIAS, Evidence, normalize
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed, unknown
from killpoint.events import FaultFired, FaultMissed, Point, RunEnd


def commits_survive(ev: Evidence, base: Evidence | None) -> Verdict:
    """A database crash keeps what was committed and drops what was not: the checkpoint write committed
    just before a `db-crash` is in the audit trail afterwards, and the one still open at it is not.

    Needs the worker to report the seq it writes at its checkpoint points (white-box workers do). A run with
    no db-crash fired at a checkpoint write (none planned, none reached, or only at other points) did not
    exercise it: `n/a`, never a pass."""
    fired = [f for f in ev.faults() if f.action == "db-crash"]
    crashes = [f for f in fired if f.point in ("checkpoint.writing", "checkpoint.committed")]
    if not crashes:
        elsewhere = f" (only at {', '.join(sorted({f.point for f in fired}))})" if fired else ""
        return not_applicable("commits_survive", f"not exercised: no db-crash at a checkpoint write in this run{elsewhere}")
    written = {(w.get("app"), w.get("seq")) for w in ev.audit}
    problems = []
    for f in crashes:
        at = next((e for e in reversed(ev.events[:ev.events.index(f)]) if isinstance(e, Point)
                   and e.inc == f.inc and e.point == f.point), None)
        if at is None or at.seq is None:
            return unknown("commits_survive", f"the worker did not report the seq it was writing at {f.point}")
        kept = (f.inc, at.seq) in written
        if f.point == "checkpoint.committed" and not kept:
            problems.append(f"seq {at.seq} by {f.inc} was committed before the crash and is gone")
        if f.point == "checkpoint.writing" and kept and not _went_on(ev, f):
            problems.append(f"seq {at.seq} by {f.inc} was still open at the crash, yet is stored")
    if problems:
        return failed("commits_survive", "the database crash changed what was committed", problems)
    return passed("commits_survive", f"{len(crashes)} crash(es): committed writes kept, open ones rolled back")


def _went_on(ev: Evidence, fault: FaultFired) -> bool:
    """True when the incarnation a db-crash hit reached another point after it: it survived the crash (a
    framework that reconnects and retries), so a write of the same seq by it is its retry, not the open one."""
    after = ev.events[ev.events.index(fault) + 1:]
    return any(isinstance(e, Point) and e.inc == fault.inc for e in after)


def retries_keep_keys(ev: Evidence, base: Evidence | None) -> Verdict:
    """Every service request, first try or retry, carried an idempotency key the crash-free run used.

    Keys are compared with run-specific names replaced (`attempt_aliases`): each key named by its service
    and order of first appearance among the run's attempts, applied or not (a correct key whose request
    never applied in this run, an error answered before it could, is still the crash-free run's key). A run
    that sent no service request (an agent whose effects are all in its own tables) did not exercise it:
    `n/a`, never a pass."""
    if not ev.attempts:
        return not_applicable("retries_keep_keys", "not exercised: the run sent no service request")
    if base is None:
        return unknown("retries_keep_keys", "no crash-free baseline to compare with")
    known = {(a.get("service"), normalize(a.get("key"), attempt_aliases(base))) for a in base.attempts}
    mine = attempt_aliases(ev)
    strange = [a for a in ev.attempts if (a.get("service"), normalize(a.get("key"), mine)) not in known]
    if strange:
        return failed("retries_keep_keys", f"{len(strange)} request(s) with a key the crash-free run never used",
                      [f"{a.get('service')} key={normalize(a.get('key'), mine)} ({a.get('outcome')})"
                       for a in strange])
    retried = len(ev.attempts) - len({(a.get("service"), a.get("key")) for a in ev.attempts})
    return passed("retries_keep_keys", f"{len(ev.attempts)} requests, {retried} retried, all with the crash-free keys")


def attempt_aliases(ev: Evidence) -> dict[str, str]:
    """`ev.aliases` with its keys numbered among the attempts instead of the applied effects: each key of a
    request, applied or not, named `<SERVICE-keyN>` by its service and order of first appearance."""
    out = {name: alias for name, alias in ev.aliases.items() if "-key" not in alias}
    counts: dict[str, int] = {}
    for a in ev.attempts:
        service, key = str(a.get("service")), a.get("key")
        if isinstance(key, str) and len(key) >= MIN_ALIAS and key not in out:
            counts[service] = counts.get(service, 0) + 1
            out[key] = f"<{service}-key{counts[service]}>"
    return dict(sorted(out.items(), key=lambda kv: -len(kv[0])))


def faults_injected(ev: Evidence, base: Evidence | None) -> Verdict:
    """Every fault the trial asked for was injected: none was missed (a db-crash on a database killpoint
    does not own, no live worker to signal), and, for an explicit schedule (`replay --schedule`, the
    pytest API), every fault fired. Otherwise nothing was tested there: `unknown`, never a pass.

    A generated schedule may ask for what the run never offers (a second `stop` while the only worker is
    frozen): like a fault the run never reached, that is counted and listed, not decisive; a fault the
    harness cannot inject at all (a db-crash on a database it does not own) is always decisive."""
    explicit = ev.replay.explicit
    missed = [f"{e.fault}: {e.reason}" for e in ev.events if isinstance(e, FaultMissed)
              and (explicit or not str(e.reason).startswith("no live incarnation"))]
    if missed:
        return unknown("faults_injected", f"a fault could not be injected ({missed[0]})")
    if explicit:
        unfired = [u for e in ev.events if isinstance(e, RunEnd) for u in e.unfired or []]
        if unfired:
            return unknown("faults_injected", f"the run never reached {', '.join(unfired)}: nothing was injected there")
    return passed("faults_injected", f"{len(ev.faults())} fault(s) injected")
