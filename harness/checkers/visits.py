"""Visits: which pass of the cursor over a step each point, fault and service attempt belongs to.

A step may be visited more than once in a run (a loop: `charge` twice for two installments). A *visit* is
`(step, n)`, the n-th time the cursor came to `step` (1-based, in the run's order), so a replay of the same
visit (resumed after a kill, the zombie and its successor) is told apart from the next pass of a loop:

1. A worker that reports the checkpoint seq it loaded at `step.start` (the reference runtime, a black-box
   worker read through the SQL barrier) starts a new visit of `step` at each seq not seen before for it; a
   replay loads the same checkpoint, hence the same seq, and is the same visit. A seq whose committed
   checkpoint the audit shows as `paused` at the same cursor (a drained worker's last write) does not start
   a visit while the step's last visit is unfinished (no checkpoint of it committed: the run was only
   paused there); after a finished one it is the loop's next pass (a worker drained after `act` finished,
   paused at `think`, resumes with `think`'s next visit).
2. A worker that reports no seq visits each step once (`n` is 1): per step, as before.
3. Any other point (a service's `effect.received`, a fault) is in the visit its incarnation last started
   of that step, else in the last visit of that step in the run, else in visit 1.

The n-th attempt a service saw is paired with the n-th request point of that service (`attempt_visits`):
None when they do not pair up (a request refused before its point, a history without service points).
"""

from __future__ import annotations

from collections import Counter

from killpoint.checkers.evidence import Evidence
from killpoint.events import Event, FaultFired, Point

Visit = tuple[str | None, int]
"""(step, n): the n-th visit of step (1-based)."""

REQUEST_POINTS = ("effect.received", "model.request")


def _paused(ev: Evidence) -> set[tuple[str | None, int]]:
    """(cursor, seq) of the audit's paused writes: resuming there goes on with the same visit."""
    return {(w.get("cursor"), w.get("seq")) for w in ev.audit if w.get("status") == "paused"}


def event_visits(ev: Evidence) -> dict[int, Visit]:
    """The visit of each point and fault of `ev.events` (by index), rules 1-3 of the module docstring."""
    paused = _paused(ev)
    seqs: dict[str | None, dict[int, int]] = {}  # step -> seq -> visit number
    last: dict[str | None, int] = {}  # step -> its last visit number so far
    finished: set[str | None] = set()  # steps whose last visit committed its checkpoint
    current: dict[str | None, Visit] = {}  # incarnation -> the visit it last started
    out: dict[int, Visit] = {}
    for i, e in enumerate(ev.events):
        if not isinstance(e, (Point, FaultFired)):
            continue
        step = e.step
        if isinstance(e, Point) and e.point == "step.start":
            known = seqs.setdefault(step, {})
            if e.seq is None:
                n = 1
            elif e.seq in known:
                n = known[e.seq]
            elif known and (step, e.seq) in paused and step not in finished:
                n = known[e.seq] = last.get(step, 1)
            else:
                n = known[e.seq] = last.get(step, 0) + 1
            if n > last.get(step, 0):
                finished.discard(step)
            last[step] = max(last.get(step, 0), n)
            current[e.inc] = (step, n)
            out[i] = (step, n)
            continue
        mine = current.get(e.inc)
        out[i] = mine if mine is not None and mine[0] == step else (step, last.get(step, 1))
        if isinstance(e, Point) and e.point == "checkpoint.committed" and out[i] == (step, last.get(step)):
            finished.add(step)
    return out


def visits_of(ev: Evidence, kind: type[Event]) -> list[tuple[Event, Visit]]:
    """The events of `kind` with their visits, in order."""
    visits = event_visits(ev)
    return [(e, visits[i]) for i, e in enumerate(ev.events) if isinstance(e, kind) and i in visits]


def attempt_visits(ev: Evidence) -> list[Visit] | None:
    """The visit of each of `ev.attempts`: the n-th attempt a service saw is the n-th request point of that
    service (`effect.received`, or `model.request` for the model). None if they do not pair up."""
    paired = attempt_operations(ev)
    return None if paired is None else [visit for visit, _ in paired]


Operation = tuple[str | None, int]
"""(incarnation, n): the n-th operation an incarnation sent in a visit."""


def attempt_operations(ev: Evidence) -> list[tuple[Visit, Operation]] | None:
    """The visit of each of `ev.attempts` (as `attempt_visits`) and the operation it belongs to: requests an
    incarnation sent in one visit with no `effect.responded` point between them (several tool calls of one
    model turn sent at once, a client's retries of one request) are one operation; each answered request
    (the worker reports `effect.responded`) ends one. None if the attempts do not pair up."""
    received: dict[str, list[tuple[Visit, Operation]]] = {}
    ops: Counter = Counter()  # (incarnation, visit) -> operations ended so far
    for e, visit in visits_of(ev, Point):
        assert isinstance(e, Point)
        if e.point == "step.start":
            ops[e.inc, visit] = 0
        elif e.point == "effect.responded" and e.source in (None, "worker"):
            ops[e.inc, visit] += 1
        elif e.point in REQUEST_POINTS:
            received.setdefault(str(e.source), []).append((visit, (e.inc, ops[e.inc, visit])))
    seen: Counter = Counter()
    out: list[tuple[Visit, Operation]] = []
    for a in ev.attempts:
        service = str(a.get("service"))
        if seen[service] >= len(received.get(service, [])):
            return None
        out.append(received[service][seen[service]])
        seen[service] += 1
    if any(len(visits) != seen[service] for service, visits in received.items()):
        return None
    return out


def order(ev: Evidence) -> list[Visit]:
    """The run's visits in the order they first reached a point."""
    out: list[Visit] = []
    for _, visit in visits_of(ev, Point):
        if visit[0] and visit not in out:
            out.append(visit)
    return out


def label(visit: Visit, several: bool) -> str:
    """`step`, or `step (visit n)` when the step is visited more than once."""
    step, n = visit
    return f"{step or 'the run'} (visit {n})" if several else str(step or "the run")


def looped(*visits: Visit) -> set[str | None]:
    """The steps visited more than once among `visits`."""
    return {step for step, n in visits if n > 1}
