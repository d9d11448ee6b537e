"""A property over the checkers: for any evidence in which every effect is applied exactly once and the run
ends in the crash-free run's final state, no checker says FAIL.

The evidence is built the way a correct agent's run is recorded (harness/events.py, the fakes' journal): a
flow of step visits (a step may come back: a loop), each visit reporting `step.start` with the seq it
loaded, at most one effect (keyed per visit, the key scheme drawn: `<run>:<step>:<n>`, a uuid, a digest),
an optional re-read of an earlier effect (a request the service deduplicates, in the crash-free run too),
then its checkpoint. A faulted run is the same flow with process faults drawn at any of a visit's points:
the incarnation dies there, the next one loads the last committed checkpoint and does the visit again,
sending its effect again under the same key (deduplicated if it had applied). Every effect is applied
exactly once and the final state is the crash-free one's, so every verdict must be pass, unknown or n/a.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from killpoint.checkers import CHECKERS, run_checkers
from killpoint.checkers.evidence import Evidence
from killpoint.events import FaultFired, Point

STEPS = ("plan", "charge", "email", "record")
SERVICES = ("ledger", "mailer")
POINTS = ("step.start", "effect.received", "effect.applied", "effect.responded", "checkpoint.writing",
          "checkpoint.committed")


@dataclass(frozen=True)
class Visit:
    step: str
    service: str | None  # the effect's service, or None: no effect
    reread: bool  # re-send an earlier visit's request to read its answer (deduplicated)


@dataclass
class Recorder:
    """Builds one run's evidence as the harness would record it."""

    run_id: str
    scheme: str
    ev: Evidence = field(init=False)
    inc: int = 0
    order: int = 0
    applied: dict = field(default_factory=dict)  # key -> (service, payload)

    def __post_init__(self) -> None:
        self.ev = Evidence(self.run_id)
        self.start_incarnation()

    @property
    def inc_id(self) -> str:
        return f"{self.run_id}#{self.inc}"

    def start_incarnation(self) -> None:
        self.inc += 1
        self.ev.incarnations.append({"inc": self.inc_id, "role": "worker", "exit_code": 0, "signal": None})

    def point(self, step: str, point: str, source: str = "worker", seq: int | None = None) -> None:
        self.ev.events.append(Point(run_id=self.run_id, inc=self.inc_id, step=step, point=point, source=source,
                                    seq=seq))

    def key(self, step: str, n: int) -> str:
        name = f"{self.run_id}:{step}:{n}"
        if self.scheme == "uuid":
            return str(uuid.uuid5(uuid.NAMESPACE_URL, name))
        if self.scheme == "digest":
            return hashlib.sha256(name.encode()).hexdigest()[:24]
        return name

    def send(self, step: str, service: str, key: str, payload: dict) -> None:
        self.point(step, "effect.received", source=service)
        self.order += 1
        outcome = "deduplicated" if key in self.applied else "applied"
        self.ev.attempts.append({"order": self.order, "service": service, "key": key, "outcome": outcome,
                                 "endpoint": f"POST /v1/{service}"})
        if outcome == "applied":
            self.applied[key] = (service, payload)
            self.ev.effects.append({"order": self.order, "service": service, "key": key, "payload": payload,
                                    "id": f"{service}_{hashlib.sha256(key.encode()).hexdigest()[:10]}",
                                    "attempt": self.order, "endpoint": f"POST /v1/{service}"})


def record(run_id: str, flow: list[Visit], scheme: str, faults: dict[int, str]) -> Evidence:
    """The evidence of `flow` run with `faults` (visit index -> the point a kill hits in it)."""
    r = Recorder(run_id, scheme)
    seq = 0
    r.ev.audit.append({"seq": 0, "cursor": flow[0].step, "status": "running", "app": r.inc_id})
    counts: dict[str, int] = {}
    for i, visit in enumerate(flow):
        n = counts[visit.step] = counts.get(visit.step, 0) + 1
        nxt = flow[i + 1].step if i + 1 < len(flow) else "done"
        key = r.key(visit.step, n)
        payload = {"step": visit.step, "n": n, "amount": 100 * (i + 1)}
        earlier = next(iter(r.applied), None) if visit.reread else None  # what this visit reads back
        for attempt in (0, 1) if i in faults else (0,):
            fault = faults.get(i) if attempt == 0 else None
            for point in POINTS:
                if point == "step.start":
                    r.point(visit.step, point, seq=seq)
                elif point in ("effect.received", "effect.applied", "effect.responded"):
                    if visit.service is None:
                        continue
                    if point == "effect.received":
                        if earlier is not None:
                            r.send(visit.step, r.applied[earlier][0], earlier, r.applied[earlier][1])
                        r.send(visit.step, visit.service, key, payload)
                    else:
                        r.point(visit.step, point, source=visit.service if point == "effect.applied" else "worker")
                elif point == "checkpoint.writing":
                    r.point(visit.step, point, seq=seq + 1)
                else:
                    if fault != point:
                        r.ev.audit.append({"seq": seq + 1, "cursor": nxt, "status": "done" if nxt == "done"
                                           else "running", "app": r.inc_id})
                    r.point(visit.step, point, seq=seq + 1)
                if fault == point:
                    r.ev.events.append(FaultFired(run_id=run_id, inc=r.inc_id, step=visit.step, point=point,
                                                  action="kill", nth=1))
                    r.ev.incarnations[-1].update(exit_code=None, signal=9)
                    r.start_incarnation()
                    break
            else:
                break
            if fault == "checkpoint.committed":  # committed before the kill: the next visit goes on
                r.ev.audit.append({"seq": seq + 1, "cursor": nxt, "status": "done" if nxt == "done" else "running",
                                   "app": r.ev.incarnations[-2]["inc"]})
                break
        seq += 1
    state = {"visits": [v.step for v in flow], "effects": list(r.applied)}
    r.ev.final = {"cursor": "done", "status": "done", "seq": seq, "state": r.ev.normalize(state), "cost_usd": 0.0}
    return r.ev


visits = st.builds(Visit, st.sampled_from(STEPS), st.one_of(st.none(), st.sampled_from(SERVICES)), st.booleans())


@settings(max_examples=300, deadline=None)
@given(flow=st.lists(visits, min_size=1, max_size=7), scheme=st.sampled_from(("run", "uuid", "digest")),
       data=st.data())
def test_no_checker_fails_a_run_whose_effects_are_each_applied_once(flow: list[Visit], scheme: str,
                                                                      data: st.DataObject) -> None:
    faults = data.draw(st.dictionaries(st.integers(0, len(flow) - 1), st.sampled_from(POINTS), max_size=3))
    base = record("baseline-1", flow, scheme, {})
    ev = record("crash-points-1", flow, scheme, faults)
    assert len(ev.effects) == len(base.effects)  # the premise: the same effects, each key applied once
    assert len({e["key"] for e in ev.effects}) == len(ev.effects)
    for checker, v in zip(CHECKERS, run_checkers(CHECKERS, ev, base), strict=True):
        assert v.outcome != "fail", (checker, v, faults)
