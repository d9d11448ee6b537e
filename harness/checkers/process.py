"""Checkers of how the incarnations behaved: no_rewind, bounded_rework, fenced_zombie,
drains_on_sigterm, no_orphans."""

from __future__ import annotations

from collections import Counter

from killpoint.checkers.effects import _effect_keys
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict, failed, passed, unknown
from killpoint.events import Escalate, FaultFired, Point
from killpoint.faults.points import PROCESS_ACTIONS

DRAIN_DEADLINE_EXIT = 6
INTERRUPTING = frozenset({"kill", "stop", "db-crash"})
"""Faults that end or freeze a worker from outside: a drain they cut short says nothing about the drain."""


def no_rewind(ev: Evidence, base: Evidence | None) -> Verdict:
    """The audit trail of committed checkpoint writes never goes back in seq."""
    if not ev.audit:
        return unknown("no_rewind", "no checkpoint writes were audited")
    for prev, cur in zip(ev.audit, ev.audit[1:], strict=False):
        if cur["seq"] <= prev["seq"]:
            return failed("no_rewind", f"checkpoint went back from seq {prev['seq']} to {cur['seq']}", [
                f"seq {prev['seq']} cursor {prev.get('cursor')} status {prev.get('status')} by {prev.get('app')}",
                f"then seq {cur['seq']} cursor {cur.get('cursor')} status {cur.get('status')} by {cur.get('app')}",
            ])
    return passed("no_rewind", f"{len(ev.audit)} checkpoint writes, seq strictly increasing")


def bounded_rework(ev: Evidence, base: Evidence | None) -> Verdict:
    """A fault costs at most the step it hit, and that step repeats at most one effect.

    Each step starts at most once plus once per process fault on it (or service fault that ended the worker:
    the last fault its incarnation met before exiting with an error, as a client that lets a 5xx end the
    worker does); and a step's effects are seen again
    by the services (retries they deduplicated) at most once per fault on that step, of any kind: a replayed
    step with one externally visible effect repeats one operation (the articles' "one effect per step").
    Where the services' attempts cannot be paired with the steps that sent them, the bound is run-wide. A
    fault at a step's `checkpoint.committed`, and a `stop` (a zombie and its successor both go on), counts
    for the step after it too (`_following`).
    """
    starts = Counter(e.step for e in ev.events if isinstance(e, Point) and e.point == "step.start")
    if not starts and not ev.attempts:
        return unknown("bounded_rework", "no step.start points (black-box worker) and no service attempts")
    hits = Counter(f.step for f in ev.faults() if f.action in PROCESS_ACTIONS or _ended_worker(ev, f))
    over = {s: n for s, n in starts.items() if n > 1 + hits.get(s, 0)}
    if over:
        return failed("bounded_rework", "steps were re-done more often than the faults that hit them explain",
                      [f"{s}: started {n}x, {hits.get(s, 0)} fault(s) on it" for s, n in sorted(over.items())])
    steps = _attempt_steps(ev)
    repeated = [(a, step) for a, step in zip(ev.attempts, steps or [None] * len(ev.attempts), strict=True)
                if a.get("outcome") == "deduplicated"]
    faults = Counter(f.step if steps is not None else None for f in ev.faults())
    if steps is not None:  # a fault at a step's committed checkpoint is at the boundary: the next step may redo
        following = _following(base)
        faults.update(following[f.step] for f in ev.faults()
                      if (f.point == "checkpoint.committed" or f.action == "stop") and f.step in following)
    counts = Counter(step for _, step in repeated)
    excess = {s: n for s, n in counts.items() if n > faults.get(s, 0)}
    if excess:
        where = ", ".join(f"{s or 'the run'}: {n} repeated after {faults.get(s, 0)} fault(s)"
                          for s, n in sorted(excess.items(), key=str))
        return failed("bounded_rework", f"a replay repeated more than one operation per fault ({where})",
                      [f"repeated: {a.get('service')} key={ev.normalize(a.get('key'))}"
                       + (f" (step {s})" if s else "") for a, s in repeated])
    if not starts:
        return passed("bounded_rework", "black-box worker: repeated effects within one per fault (step starts unseen)")
    return passed("bounded_rework", f"{sum(starts.values())} step starts for {len(starts)} steps")


def _ended_worker(ev: Evidence, fault: FaultFired) -> bool:
    """True for a service fault that ended its worker: the last fault of its incarnation, which then exited
    with a non-zero code (not by a signal: a process fault or the harness ended that one)."""
    inc = fault.inc
    if not inc or fault.action in PROCESS_ACTIONS:
        return False
    if [f for f in ev.faults() if f.inc == inc][-1] is not fault:
        return False
    end = next((i for i in ev.incarnations if i.get("inc") == inc), None)
    return end is not None and end.get("signal") is None and end.get("exit_code") not in (None, 0)


def _following(base: Evidence | None) -> dict[str, str]:
    """Each step's successor in the crash-free run (the order its steps first reached a point). A fault at
    `checkpoint.committed` lands between the two, and a worker that goes on before noticing it (a database
    gone, a black-box framework that touches the database only at its next checkpoint) redoes the next
    step's one operation: that repeat is the fault's, not an unbounded rework."""
    order: list[str] = []
    for e in base.events if base is not None else ():
        if isinstance(e, Point) and e.step and e.step not in order:
            order.append(e.step)
    return dict(zip(order, order[1:], strict=False))


def _attempt_steps(ev: Evidence) -> list[str | None] | None:
    """The step of each of `ev.attempts`: the n-th attempt a service saw is the n-th request point of that
    service in the history (`effect.received`, or `model.request` for the model), named by the step it was
    attributed to. None if they do not pair up."""
    received: dict[str, list[str | None]] = {}
    for e in ev.events:
        if isinstance(e, Point) and e.point in ("effect.received", "model.request"):
            received.setdefault(str(e.source), []).append(e.step)
    seen: Counter = Counter()
    out: list[str | None] = []
    for a in ev.attempts:
        service = str(a.get("service"))
        if seen[service] >= len(received.get(service, [])):
            return None
        out.append(received[service][seen[service]])
        seen[service] += 1
    if any(len(steps) != seen[service] for service, steps in received.items()):
        return None
    return out


def conventions(ev: Evidence) -> bool:
    """True when the worker is held to killpoint's exit codes (`--exit-codes killpoint`, the default for
    the reference runtime; a `--worker-cmd` is judged without them unless asked)."""
    return ev.knobs.exit_codes == "killpoint"


def fenced_zombie(ev: Evidence, base: Evidence | None) -> Verdict:
    """A stopped-then-thawed worker writes nothing once an incarnation started after it has written, and
    then, under killpoint's exit-code convention, stops as fenced (exit 3, 4 or 5; a queue worker may go
    on to other runs). Without the convention only the writes are judged, and they must name their
    writer (PGAPPNAME), else the verdict is unknown. A zombie whose successors wrote nothing (they found
    the run done, or lost the race for a row the zombie held locked) has nothing to be fenced from."""
    zombies = [f.inc for f in ev.faults() if f.action == "stop"]
    if not zombies:
        return passed("fenced_zombie", "not exercised: no stop fault in this run")
    if not conventions(ev):
        named = {i.get("inc") for i in ev.incarnations}
        if not any(w.get("app") in named for w in ev.audit):
            return unknown("fenced_zombie", "no committed write names its worker (the worker's database sessions "
                           "do not carry PGAPPNAME), so a zombie's writes cannot be told from its successor's")
    for z in zombies:
        later = _started_after(ev, z)
        others_wrote = False
        for w in ev.audit:
            if w.get("app") == z and others_wrote:
                return failed("fenced_zombie", f"zombie {z} wrote a checkpoint after another worker took over",
                              [f"seq {w['seq']} cursor {w.get('cursor')} status {w.get('status')} by {z}"])
            if w.get("app") not in (z, None) and (later is None or w.get("app") in later):
                others_wrote = True
        end = _incarnation(ev, z)
        # a queue worker serves many runs: fenced out of one, it goes on to the next job and may exit 0;
        # that it wrote nothing after the takeover (above) is what fencing means for it
        if (conventions(ev) and others_wrote and end and end.get("role") != "queue"
                and end.get("exit_code") not in (3, 4, 5) and end.get("signal") is None):
            return failed("fenced_zombie", f"zombie {z} exited {end.get('exit_code')} instead of stopping as fenced",
                          ["expected exit 4 (fenced) or 5 (lease lost)"])
    return passed("fenced_zombie", f"{len(zombies)} zombie(s) fenced")


def _started_after(ev: Evidence, inc: str | None) -> set[str] | None:
    """The incarnations started after `inc` (the list is in start order); None if `inc` is not in it.

    Only these can have taken over from it: an earlier incarnation's writes (before a nested freeze, say)
    do not make `inc` a zombie."""
    names = [i.get("inc") for i in ev.incarnations]
    return set(names[names.index(inc) + 1:]) if inc in names else None


def drains_on_sigterm(ev: Evidence, base: Evidence | None) -> Verdict:
    """After SIGTERM the worker takes no new step and exits by itself before the grace period ends,
    having checkpointed.

    With `extra["drain_expect"] == "exit"` (a step longer than the drain deadline) only the clean
    exit is required (0, or 6: the drain deadline passed first); otherwise the worker must also leave a `paused` (or `done`) checkpoint.
    """
    terms = [f for f in ev.faults() if f.action == "term"]
    if not terms:
        return passed("drains_on_sigterm", "not exercised: no term fault in this run")
    escalated = {e.inc for e in ev.events if isinstance(e, Escalate)}
    faults = ev.faults()
    for f in terms:
        inc = f.inc
        if any(g.inc == inc and g.action in INTERRUPTING for g in faults[faults.index(f) + 1:]):
            continue  # a later fault of the schedule killed or froze this worker while it drained: not judged
        end = _incarnation(ev, inc)
        if inc in escalated:
            return failed("drains_on_sigterm", f"{inc} was still running when the grace period ended "
                          f"({ev.knobs.grace}s) and was SIGKILLed", [f"term at {f.step}:{f.point}"])
        after = ev.events[ev.events.index(f) + 1:]
        taken = [e.step for e in after if isinstance(e, Point) and e.point == "step.start" and e.inc == inc]
        if taken:
            return failed("drains_on_sigterm", f"{inc} took new work after SIGTERM: started {', '.join(taken)}",
                          [f"term at {f.step}:{f.point}"])
        if end is None:
            return unknown("drains_on_sigterm", f"no end recorded for {inc}")
        if not conventions(ev):
            return _drained_by_records(ev, base, terms)
        expect = ev.extra.get("drain_expect", "checkpoint")
        clean = (0, DRAIN_DEADLINE_EXIT) if expect == "exit" else (0,)
        if end.get("signal") is not None or end.get("exit_code") not in clean:
            return failed("drains_on_sigterm", f"{inc} ended with {_how(end)} after SIGTERM, not exit "
                          f"{' or '.join(map(str, clean))}", [f"term at {f.step}:{f.point}"])
        if expect == "checkpoint":
            statuses = [w.get("status") for w in ev.audit if w.get("app") == inc]
            if not statuses or statuses[-1] not in ("paused", "done"):
                return failed("drains_on_sigterm", f"{inc} exited 0 after SIGTERM without checkpointing as paused",
                              [f"its writes: {statuses or 'none'}"])
    return passed("drains_on_sigterm", f"{len(terms)} SIGTERM(s) drained cleanly")


def _drained_by_records(ev: Evidence, base: Evidence | None, terms: list[FaultFired]) -> Verdict:
    """Without an exit-code convention, a drain is judged by what it left: the step in flight at SIGTERM
    was finished or safely redone, i.e. the run reached done and its effects are the crash-free run's
    (none applied twice by the redo, none lost)."""
    where = [f"term at {f.step}:{f.point}" for f in terms]
    if base is None:
        return unknown("drains_on_sigterm", "no crash-free baseline to compare the effects with")
    if ev.final is None or ev.final.get("status") != "done":
        return failed("drains_on_sigterm", "the run did not finish after SIGTERM: the step in flight was neither "
                      "finished nor redone", where)
    extra = _effect_keys(ev, base.volatile) - _effect_keys(base, base.volatile)
    if extra:
        return failed("drains_on_sigterm", f"the step in flight at SIGTERM was redone unsafely: "
                      f"{sum(extra.values())} effect(s) applied again", where)
    ends = ", ".join(_how(i) for i in ev.incarnations if i.get("inc") in {f.inc for f in terms})
    return passed("drains_on_sigterm", f"{len(terms)} SIGTERM(s): the step in flight was finished or safely redone "
                  f"(no exit-code convention; ended with {ends})")


def no_orphans(ev: Evidence, base: Evidence | None) -> Verdict:
    """No worker process outlived the run."""
    if ev.leftovers:
        return failed("no_orphans", f"{len(ev.leftovers)} process(es) still alive after the run", ev.leftovers)
    return passed("no_orphans", f"{len(ev.incarnations)} incarnation(s), none left running")


def _incarnation(ev: Evidence, inc: str | None) -> dict | None:
    return next((i for i in ev.incarnations if i.get("inc") == inc), None)


def _how(end: dict) -> str:
    return f"signal {end['signal']}" if end.get("signal") is not None else f"exit {end.get('exit_code')}"
