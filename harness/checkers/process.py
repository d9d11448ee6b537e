"""Checkers of how the incarnations behaved: no_rewind, bounded_rework, fenced_zombie,
drains_on_sigterm, no_orphans."""

from __future__ import annotations

from collections import Counter
from typing import Any

from killpoint.checkers.effects import _effect_keys
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.starved import starved
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed, unknown
from killpoint.checkers.visits import (
    REQUEST_POINTS,
    Operation,
    Visit,
    attempt_operations,
    event_visits,
    label,
    looped,
    order,
    visits_of,
)
from killpoint.events import Escalate, FaultFired, Note, Point
from killpoint.faults.points import base as action_name
from killpoint.faults.points import is_process

DRAIN_DEADLINE_EXIT = 6
INTERRUPTING = frozenset({"kill", "stop", "db-crash", "clock"})
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
    """A fault costs at most the step visit it hit, and that visit repeats at most one effect.

    Counted per visit of the cursor (`checkers.visits`: a loop's second pass over a step is a visit of its
    own, a replay of a visit is not). Each visit starts at most once plus once per process fault on it (or
    service fault that ended the worker: the last fault its incarnation met before exiting with an error, as
    a client that lets a 5xx end the worker does); and a visit's effects are seen again by the services
    (requests they deduplicated) at most once per fault on that visit, of any kind, beyond those the
    crash-free run's same visit also had deduplicated (a re-read with no fault: the agent re-sends a request
    to read its answer back, which is no rework): a replayed step with one externally visible effect repeats
    one operation (the articles' "one effect per step"); each start of a visit may re-read what the
    crash-free visit re-read. Where the services' attempts cannot be paired with
    the visits that sent them, the bound is run-wide; so it is for requests no step claims (a black-box
    worker's that the services saw with no step, such as a thawed zombie's). A black-box worker's repeat is in
    the visit of the first request under its key (`_to_first_request`: a relay's re-send of an earlier step's
    effect, which the services put in the cursor's step, repeats that earlier step). A fault at a visit's
    `checkpoint.committed`, and a `stop` (a zombie and its successor both go on), counts for the visit after
    it too (`_following`); so does one at its `checkpoint.writing` when the crash-free run's next visit sent a
    request before that commit (`_late_commits`: LangGraph's async durability writes a node's checkpoint while
    the next runs). A fault that ends or freezes its worker counts, too, for each other visit it caught in
    flight in that worker (`_in_flight`: parallel branches, tool calls run at once).
    """
    points = visits_of(ev, Point)
    starts = Counter(v for e, v in points if isinstance(e, Point) and e.point == "step.start")
    if not starts and not ev.attempts:
        return unknown("bounded_rework", "no step.start points (black-box worker) and no service attempts")
    several = looped(*starts)
    faults = visits_of(ev, FaultFired)
    hits = Counter(v for f, v in faults if isinstance(f, FaultFired)
                   and (is_process(str(f.action)) or _ended_worker(ev, f)))
    hits.update(_outage_ends(ev))
    over = {v: n for v, n in starts.items() if n > 1 + hits.get(v, 0)}
    if over:
        return failed("bounded_rework", "steps were re-done more often than the faults that hit them explain",
                      [f"{label(v, v[0] in several)}: started {n}x, {hits.get(v, 0)} fault(s) on it"
                       for v, n in sorted(over.items(), key=str)])
    operations = _to_first_request(ev, attempt_operations(ev))
    paired = operations is not None
    repeated = [(a, v) for a, v in zip(ev.attempts, operations or [None] * len(ev.attempts), strict=True)
                if a.get("outcome") == "deduplicated"]
    allowed: Counter = Counter(v if paired else None for _, v in faults)
    # a stop counts twice on its visit: the successor redoes the visit, and the thawed zombie finishes what it
    # had in flight (parallel tool calls frozen mid-send) before it is fenced
    stops = [v for f, v in faults if isinstance(f, FaultFired) and f.action == "stop"]
    allowed.update(v if paired else None for v in stops)
    if paired:  # a fault at a visit's committed checkpoint is at the boundary: the next visit may redo
        following = _following(base)
        late = _late_commits(base, following)
        allowed.update(following[v] for f, v in faults if isinstance(f, FaultFired) and v in following
                       and (f.point == "checkpoint.committed" or f.action == "stop"
                            or (f.point == "checkpoint.writing" and v in late)))
    if paired and repeated:  # a fault that ends or freezes a worker also cuts short the visits beside its own
        allowed.update(_in_flight(ev, _side_by_side(base)))  # (read only when something was repeated)
    rereads = _rereads(base, paired)  # each start of a visit re-reads what the crash-free one did
    allowed.update({v: n * max(1, starts.get(v, 0) if paired else 1 + sum(hits.values()))
                    for v, n in rereads.items()})
    counts = (Counter(op[0] for op in {op for _, op in repeated if op}) if paired  # repeated operations per visit
              else Counter(None for _ in repeated))
    unplaced = [v for v in counts if v is not None and v[0] is None]
    if unplaced:  # requests no step claims (a black-box worker's, e.g. a thawed zombie's): bounded run-wide
        counts[None] = sum(counts.pop(v) for v in unplaced)
        allowed[None] = len(faults) + len(stops) + sum(allowed.pop(v, 0) for v in unplaced)
    excess = {v: n for v, n in counts.items() if n > allowed.get(v, 0)}
    if excess:
        several |= looped(*(v for v in excess if v))
        where = ", ".join(f"{label(v, v[0] in several) if v else 'the run'}: {n} repeated after "
                          f"{allowed.get(v, 0)} fault(s) or crash-free re-read(s)"
                          for v, n in sorted(excess.items(), key=str))
        return failed("bounded_rework", f"a replay repeated more than one operation per fault ({where})",
                      [f"repeated: {a.get('service')} key={ev.normalize(a.get('key'))}"
                       + (f" (step {label(op[0], op[0][0] in several)})" if op else "") for a, op in repeated])
    if not starts:
        return passed("bounded_rework", "black-box worker: repeated effects within one per fault (step starts unseen)")
    return passed("bounded_rework", f"{sum(starts.values())} step starts for {len(starts)} step visits")


def _segments(ev: Evidence) -> list[set[Visit]]:
    """The visits with points in each stretch of one incarnation between two `checkpoint.committed` points."""
    visits = event_visits(ev)
    open_: dict[str | None, set[Visit]] = {}
    out: list[set[Visit]] = []
    for i, e in enumerate(ev.events):
        if not isinstance(e, Point) or i not in visits:
            continue
        current = open_.setdefault(e.inc, set())
        current.add(visits[i])
        if e.point == "checkpoint.committed":
            out.append(open_.pop(e.inc))
    return out + list(open_.values())


def _side_by_side(base: Evidence | None) -> set[frozenset]:
    """The pairs of visits the crash-free run ran side by side: with points in one stretch between two
    commits (parallel branches of a superstep, tool calls sent at once). None without a crash-free run."""
    if base is None:
        return set()
    return {frozenset((a, b)) for seg in _segments(base) for a in seg for b in seg if a != b}


def _in_flight(ev: Evidence, side_by_side: set[frozenset]) -> Counter:
    """The visits besides its own that each fault ending or freezing its worker (a process fault, or a service
    fault that ended it: `_ended_worker`) caught in flight, once per fault: those the crash-free run ran side
    by side with the fault's (`_side_by_side`) that have a point of that incarnation since its last
    `checkpoint.committed` before the fault, or a request it sent after the fault and before its next commit
    (one arriving while the fault's point was held). Parallel branches of one graph superstep, tool calls run
    at once, steps gathered by asyncio: a kill in one repeats what the others had sent too, one operation
    each. Visits the crash-free run ran one after the other gain nothing (an early request of the next step
    is `_late_commits`' to excuse)."""
    out: Counter = Counter()
    visits = event_visits(ev)
    events = ev.events
    for i, f in enumerate(events):
        if not (isinstance(f, FaultFired) and f.inc and (is_process(str(f.action)) or _ended_worker(ev, f))):
            continue
        own, caught = visits.get(i), set()
        for span, requests_only in ((range(i - 1, -1, -1), False), (range(i + 1, len(events)), True)):
            for j in span:
                e = events[j]
                if not isinstance(e, Point) or e.inc != f.inc:
                    continue
                if e.point == "checkpoint.committed":
                    break
                if j in visits and visits[j] != own and (not requests_only or e.point in REQUEST_POINTS) \
                        and frozenset((own, visits[j])) in side_by_side:
                    caught.add(visits[j])
        out.update(caught)
    return out


def _rereads(base: Evidence | None, paired: bool) -> Counter:
    """The requests the crash-free run's services deduplicated, per visit (run-wide when not `paired`): the
    agent re-sends them with no fault (to read an answer back), so a faulted run may too."""
    if base is None:
        return Counter()
    operations = _to_first_request(base, attempt_operations(base)) if paired else None
    if paired and operations is None:
        return Counter()
    repeated = {op if paired else i for i, (a, op) in
                enumerate(zip(base.attempts, operations or [None] * len(base.attempts), strict=True))
                if a.get("outcome") == "deduplicated"}
    return Counter(op[0] if paired else None for op in repeated)


def _to_first_request(ev: Evidence, operations: list[tuple[Visit, Operation]] | None
                      ) -> list[tuple[Visit, Operation]] | None:
    """`operations` (as `attempt_operations`, None: unpaired, returned as it is; so are a white-box worker's,
    whose `step.start` points place its requests) with each deduplicated request of a black-box worker (no
    `step.start` points) moved to the visit of the first request the service saw under the same key (applied,
    or applied and answered with an error or not at all, or refused: the effect that key stands for). Such a
    worker's request names its step, if at all, by a header or its key; a generic re-send (a relay replaying
    its outbox, a resume that re-sends earlier steps' effects) names neither and is put in the step of the
    run's committed cursor (harness/run/attribution.py, rule 5): a repeat of the email is then counted on the
    step the run had reached, next to that step's own repeat (one operation of one incarnation), and charged
    to a fault that hit another step. The repeat belongs to the effect it repeats. A request no step claims
    (step None) stays where it is: bounded run-wide."""
    if operations is None or any(isinstance(e, Point) and e.point == "step.start" for e in ev.events):
        return operations
    first: dict[tuple[Any, Any], Visit] = {}  # (service, key) -> the visit of its first request
    out: list[tuple[Visit, Operation]] = []
    for a, (visit, op) in zip(ev.attempts, operations, strict=True):
        key = (a.get("service"), a.get("key"))
        if a.get("key") is not None and a.get("outcome") == "deduplicated" and visit[0] is not None:
            home = first.get(key)
            if home is not None and home[0] is not None:
                visit = home
        elif a.get("key") is not None:
            first.setdefault(key, visit)
        out.append((visit, op))
    return out


def _ended_worker(ev: Evidence, fault: FaultFired) -> bool:
    """True for a service fault that ended its worker: the last fault of its incarnation, which then exited
    with a non-zero code (not by a signal: a process fault or the harness ended that one)."""
    inc = fault.inc
    if not inc or is_process(str(fault.action)):
        return False
    if [f for f in ev.faults() if f.inc == inc][-1] is not fault:
        return False
    end = next((i for i in ev.incarnations if i.get("inc") == inc), None)
    return end is not None and end.get("signal") is None and end.get("exit_code") not in (None, 0)


def _outages(ev: Evidence) -> dict[str, int]:
    """Each service an outage fault hit, with the index in `ev.events` of its first such fault (the service is
    the `source` of the request point the fault fired at)."""
    out: dict[str, int] = {}
    for i, e in enumerate(ev.events):
        if isinstance(e, FaultFired) and action_name(str(e.action)) == "outage":
            hit = next((p for p in reversed(ev.events[:i]) if isinstance(p, Point) and p.inc == e.inc
                        and p.step == e.step and p.point == e.point), None)
            if hit is not None and hit.source:
                out.setdefault(str(hit.source), i)
    return out


def _met_outage(ev: Evidence, inc: str | None, outages: dict[str, int], since: int = 0) -> bool:
    """True when `inc` sent a request (after event `since`) to a service after an outage fault hit it."""
    return any(isinstance(e, Point) and e.inc == inc and e.point in ("effect.received", "model.request")
               and e.source in outages and i > outages[str(e.source)]
               for i, e in enumerate(ev.events) if i > since)


def _outage_ends(ev: Evidence) -> Counter:
    """Workers an outage ended beyond the one it hit: an outage lasts across steps and, as `outage=N`, across
    incarnations (a kill in its middle), so it can outlast the retries of more than one worker. Each
    incarnation that met no fault of its own, sent a request to a service in an outage and exited with an
    error counts as a fault on the visit it was in (its last step.start)."""
    outages = _outages(ev)
    if not outages:
        return Counter()
    own = {f.inc for f in ev.faults()}
    started = visits_of(ev, Point)
    out: Counter = Counter()
    for end in ev.incarnations:
        inc = end.get("inc")
        if inc in own or end.get("signal") is not None or end.get("exit_code") in (None, 0):
            continue
        mine = [v for e, v in started if isinstance(e, Point) and e.point == "step.start" and e.inc == inc]
        if mine and _met_outage(ev, inc, outages):
            out[mine[-1]] += 1
    return out


def _following(base: Evidence | None) -> dict[Visit, Visit]:
    """Each visit's successor in the crash-free run (the order its visits first reached a point). A fault at
    `checkpoint.committed` lands between the two, and a worker that goes on before noticing it (a database
    gone, a black-box framework that touches the database only at its next checkpoint) redoes the next
    visit's one operation: that repeat is the fault's, not an unbounded rework."""
    visits = order(base) if base is not None else []
    return dict(zip(visits, visits[1:], strict=False))


def _starved(escalation: Escalate) -> str:
    """Why `escalation` cannot be judged (the machine kept the worker from running), or ''."""
    return starved(escalation.inc, escalation.waited, escalation.grace,
                   f"was SIGKILLed at the end of its {escalation.grace or 0:g}s grace period")


def _missed_deadline(ev: Evidence, inc: str | None) -> str:
    """Why the exit 6 of `inc` (its drain deadline passed) cannot be judged, from its `drain.deadline` note
    (the seconds of the deadline it spent waiting for a CPU), or ''."""
    note = next((e for e in ev.events if isinstance(e, Note) and e.note == "drain.deadline" and e.inc == inc), None)
    if note is None:
        return ""
    seconds = note.extra.get("deadline_seconds")
    return starved(inc, note.extra.get("waited"), seconds if isinstance(seconds, (int, float)) else None,
                   f"exited {DRAIN_DEADLINE_EXIT} at its {seconds}s drain deadline")


def _late_commits(base: Evidence | None, following: dict[Visit, Visit]) -> set[Visit]:
    """The crash-free run's visits whose checkpoint commit came after the next visit (`following`, its
    `_following`) had sent a request (`effect.received` or `model.request`): a fault while that checkpoint is
    written has the next visit's operation in flight, and its repeat is the fault's."""
    if base is None:
        return set()
    previous = {nxt: v for v, nxt in following.items()}
    committed: set[Visit] = set()
    out: set[Visit] = set()
    for e, v in visits_of(base, Point):
        if not isinstance(e, Point):
            continue
        if e.point == "checkpoint.committed":
            committed.add(v)
        elif e.point in REQUEST_POINTS and v in previous and previous[v] not in committed:
            out.add(previous[v])
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
    the run done, or lost the race for a row the zombie held locked) has nothing to be fenced from: with
    no such zombie (or no stop fault at all) the checker was not exercised, `n/a`, never a pass."""
    zombies = [f.inc for f in ev.faults() if f.action == "stop"]
    if not zombies:
        return not_applicable("fenced_zombie", "not exercised: no stop fault in this run")
    if not conventions(ev):
        named = {i.get("inc") for i in ev.incarnations}
        if not any(w.get("app") in named for w in ev.audit):
            return unknown("fenced_zombie", "no committed write names its worker (the worker's database sessions "
                           "do not carry PGAPPNAME), so a zombie's writes cannot be told from its successor's")
    challenged = 0
    for z in zombies:
        later = _started_after(ev, z)
        others_wrote = False
        for w in ev.audit:
            if w.get("app") == z and others_wrote:
                return failed("fenced_zombie", f"zombie {z} wrote a checkpoint after another worker took over",
                              [f"seq {w['seq']} cursor {w.get('cursor')} status {w.get('status')} by {z}"])
            if w.get("app") not in (z, None) and (later is None or w.get("app") in later):
                others_wrote = True
        challenged += others_wrote
        end = _incarnation(ev, z)
        # a queue worker serves many runs: fenced out of one, it goes on to the next job and may exit 0;
        # that it wrote nothing after the takeover (above) is what fencing means for it
        if (conventions(ev) and others_wrote and end and end.get("role") != "queue"
                and end.get("exit_code") not in (3, 4, 5) and end.get("signal") is None):
            return failed("fenced_zombie", f"zombie {z} exited {end.get('exit_code')} instead of stopping as fenced",
                          ["expected exit 4 (fenced) or 5 (lease lost)"])
    if not challenged:
        return not_applicable("fenced_zombie", f"not exercised: no worker wrote after {', '.join(map(str, zombies))} "
                              "was stopped, so there was nothing to fence it from")
    return passed("fenced_zombie", f"{challenged} zombie(s) fenced")


def _started_after(ev: Evidence, inc: str | None) -> set[str] | None:
    """The incarnations started after `inc` (the list is in start order); None if `inc` is not in it.

    Only these can have taken over from it: an earlier incarnation's writes (before a nested freeze, say)
    do not make `inc` a zombie."""
    names = [i.get("inc") for i in ev.incarnations]
    return set(names[names.index(inc) + 1:]) if inc in names else None


def drains_on_sigterm(ev: Evidence, base: Evidence | None) -> Verdict:
    """After SIGTERM the worker takes no new step and exits by itself before the grace period ends,
    having checkpointed. No SIGTERM, or none that a later fault did not cut short: `n/a` (not exercised).

    With `extra["drain_expect"] == "exit"` (a step longer than the drain deadline) only the clean
    exit is required (0, or 6: the drain deadline passed first); otherwise the worker must also leave a `paused` (or `done`) checkpoint.
    """
    terms = [f for f in ev.faults() if f.action == "term"]
    if not terms:
        return not_applicable("drains_on_sigterm", "not exercised: no term fault in this run")
    escalated = {e.inc: e for e in ev.events if isinstance(e, Escalate)}
    faults = ev.faults()
    cut = [f for f in terms
           if any(g.inc == f.inc and action_name(str(g.action)) in INTERRUPTING for g in faults[faults.index(f) + 1:])]
    if len(cut) == len(terms):
        return not_applicable("drains_on_sigterm", "not exercised: a later fault killed or froze every worker "
                              "that got a SIGTERM before it could drain")
    for f in terms:
        inc = f.inc
        if f in cut:
            continue  # a later fault of the schedule killed or froze this worker while it drained: not judged
        end = _incarnation(ev, inc)
        if inc in escalated:
            starved = _starved(escalated[inc])
            if starved:
                return unknown("drains_on_sigterm", starved)
            return failed("drains_on_sigterm", f"{inc} was still running when the grace period ended "
                          f"({ev.knobs.grace}s) and was SIGKILLed", [f"term at {f.step}:{f.point}"])
        after = ev.events[ev.events.index(f) + 1:]
        taken = [e.step for e in after if isinstance(e, Point) and e.point == "step.start" and e.inc == inc]
        if taken:
            return failed("drains_on_sigterm", f"{inc} took new work after SIGTERM: started {', '.join(taken)}",
                          [f"term at {f.step}:{f.point}"])
        if end is None:
            return unknown("drains_on_sigterm", f"no end recorded for {inc}")
        if _outage_cut(ev, f, end):
            continue  # the step in flight could not finish: its service was down past the client's retries
        if not conventions(ev):
            return _drained_by_records(ev, base, terms)
        expect = ev.extra.get("drain_expect", "checkpoint")
        clean = (0, DRAIN_DEADLINE_EXIT) if expect == "exit" else (0,)
        late = _missed_deadline(ev, inc) if end.get("signal") is None and end.get("exit_code") == DRAIN_DEADLINE_EXIT else ""
        if late:
            return unknown("drains_on_sigterm", late)
        if end.get("signal") is not None or end.get("exit_code") not in clean:
            return failed("drains_on_sigterm", f"{inc} ended with {_how(end)} after SIGTERM, not exit "
                          f"{' or '.join(map(str, clean))}", [f"term at {f.step}:{f.point}"])
        if expect == "checkpoint":
            statuses = [w.get("status") for w in ev.audit if w.get("app") == inc]
            if not statuses or statuses[-1] not in ("paused", "done"):
                return failed("drains_on_sigterm", f"{inc} exited 0 after SIGTERM without checkpointing as paused",
                              [f"its writes: {statuses or 'none'}"])
    return passed("drains_on_sigterm", f"{len(terms)} SIGTERM(s) drained cleanly")


def _outage_cut(ev: Evidence, term: FaultFired, end: dict) -> bool:
    """True when the SIGTERMed worker exited with an error (not by a signal) after sending, since the SIGTERM,
    a request to a service in an outage: its drain was cut short by the outage, not skipped."""
    if end.get("signal") is not None or end.get("exit_code") in (None, 0):
        return False
    outages = _outages(ev)
    return bool(outages) and _met_outage(ev, term.inc, outages, since=ev.events.index(term))


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
