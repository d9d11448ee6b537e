"""The history's events: one frozen class per kind, and the JSON objects of `history.jsonl` read back into them.

1. Every event has `i` (its index in the history), `t` (monotonic seconds since the history began) and
   `run_id` (None: of no one run). Its class names its kind (`kind`, the JSON `type`) and its docstring
   says what it carries: that text is the kind's line in `EVENT_KINDS` and in docs/contracts.md section 6.
2. The keys a kind declares are typed attributes. The keys it does not declare are kept, as they came, in
   `extra`: a note's own fields, or what another version of the harness wrote.
3. `encode(event)` is the JSON object of an event (its declared keys, `type`, then `extra`; a key in
   `OPTIONAL` only when set); `decode(obj)` is the event of a JSON object, None when its `type` names no
   kind. `decode(encode(e)) == e`, so a history holds in memory what its file reads back as.
4. An event also reads as the JSON object it is (`e["step"]`, `e.get("seq")`, `dict(e)`), for code written
   against the free-form dicts events once were; the harness's own code reads attributes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """An event of the history (every kind's common part; see the module docstring)."""

    kind: ClassVar[str] = ""
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    """Declared keys written only when not None (a worker's report may name a seq, or not)."""
    KEYS: ClassVar[tuple[str, ...]] = ()
    """The JSON keys the kind declares, `type` aside, in order (set by `_kind`)."""
    DECLARED: ClassVar[frozenset[str]] = frozenset()
    """`KEYS` as a set (set by `_kind`)."""

    i: int = -1
    t: float = 0.0
    run_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """The keys of the event's JSON object its kind does not declare (a note's fields...)."""

    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return self.kind
        if key in self.DECLARED:
            value = getattr(self, key)
            if value is None and key in self.OPTIONAL:
                raise KeyError(key)  # not written (`encode`)
            return value
        return self.extra[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except (KeyError, TypeError):
            return False
        return True

    def __bool__(self) -> bool:
        return True  # an event is never empty (and `len` would encode it)

    def keys(self) -> Iterator[str]:
        return iter(encode(self))

    def __iter__(self) -> Iterator[str]:
        return iter(encode(self))

    def __len__(self) -> int:
        return len(encode(self))


EVENT_TYPES: dict[str, type[Event]] = {}
"""Each kind's class, by its `type`, in the order of docs/contracts.md section 6."""


def _kind(name: str):  # noqa: ANN202 - a class decorator
    """Make the class a frozen event dataclass of kind `name` and register it in `EVENT_TYPES`."""

    def make(cls: type[Event]) -> type[Event]:
        made = dataclass(frozen=True, slots=True, kw_only=True)(cls)
        made.kind = name
        made.KEYS = tuple(f.name for f in fields(made) if f.name != "extra")
        made.DECLARED = frozenset(made.KEYS)
        EVENT_TYPES[name] = made
        return made

    return make


@_kind("run.begin")
class RunBegin(Event):
    """a run starts under a schedule (`schedule`), run by the step module `steps` or, for a black-box
    worker, by the command `worker_cmd` read through the adapter `adapter` (then `steps` is None)"""

    OPTIONAL = frozenset({"worker_cmd", "adapter"})
    schedule: str | None = None
    steps: str | None = None
    worker_cmd: str | None = None
    adapter: str | None = None


@_kind("inc.start")
class IncStart(Event):
    """an incarnation has a pid (`inc`, `role`, `pid`)"""

    inc: str | None = None
    role: str | None = None
    pid: int | None = None


@_kind("inc.end")
class IncEnd(Event):
    """an incarnation ended (`exit_code` or `signal`; `cpu`: its leader's CPU seconds, when forked)"""

    OPTIONAL = frozenset({"cpu"})
    inc: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    cpu: float | None = None


@_kind("point")
class Point(Event):
    """a kill point reached (`step`, `point`, `nth`, `source`: worker, sql-barrier or a service)"""

    OPTIONAL = frozenset({"seq"})
    inc: str | None = None
    step: str | None = None
    point: str | None = None
    nth: int | None = None
    source: str | None = None
    seq: int | None = None
    """The checkpoint seq a worker's report names at a checkpoint point, if any."""


@_kind("fault")
class FaultFired(Event):
    """a fault fired (`action` at `step:point`, occurrence `nth`)"""

    inc: str | None = None
    step: str | None = None
    point: str | None = None
    action: str | None = None
    nth: int | None = None


@_kind("fault.missed")
class FaultMissed(Event):
    """a fault that could not be injected (`fault`, `reason`)"""

    fault: str | None = None
    reason: str | None = None


@_kind("escalate")
class Escalate(Event):
    """SIGKILL after the grace period of a SIGTERM (`grace`); `waited`: the seconds of it the worker spent
    waiting for a CPU (None where unknown)"""

    OPTIONAL = frozenset({"waited"})
    inc: str | None = None
    grace: float | None = None
    waited: float | None = None


@_kind("thaw")
class Thaw(Event):
    """a stopped worker continued (`why`)"""

    inc: str | None = None
    why: str | None = None


@_kind("db.down")
class DbDown(Event):
    """the owned Postgres crashed by a db-crash fault"""


@_kind("db.up")
class DbUp(Event):
    """the owned Postgres restarted"""


@_kind("note")
class Note(Event):
    """a worker's note (`note` and its fields)"""

    inc: str | None = None
    note: str | None = None


@_kind("hung")
class Hung(Event):
    """an incarnation still running when its run's time budget (`--run-timeout`) ran out (`inc`, `pid`,
    `last_point`, `stack`: every thread's stack, from py-spy or the worker's stack signal; `age`: the seconds
    it ran, `waited`: the seconds of them it spent waiting for a CPU, where known)"""

    OPTIONAL = frozenset({"age", "waited"})
    inc: str | None = None
    pid: int | None = None
    last_point: str | None = None
    stack: list[str] | None = None
    age: float | None = None
    waited: float | None = None


@_kind("run.end")
class RunEnd(Event):
    """a run's driving ended (`limit`: the bound it hit; `unfired`: faults never reached)"""

    limit: str | None = None
    unfired: list[str] | None = None


@_kind("jobs")
class Jobs(Event):
    """how many trials may run at once changed (`allowed`, between `least` and `most`): the default `-j`
    widens while the cores idle (`run.pool.WhileIdle`) and narrows back as they fill"""

    allowed: int | None = None
    least: int | None = None
    most: int | None = None


@_kind("fleet.submit")
class FleetSubmit(Event):
    """a fleet created its runs (`runs`)"""

    runs: list[str] | None = None


@_kind("together")
class Together(Event):
    """the runs of a fleet held at a step's start (`step`) went on at once: all of them (`runs`), or, when
    those named `missing` had not come within the rendezvous's timeout, the others, and the set is held no
    more (run/rendezvous.py; concurrent-runs)"""

    OPTIONAL = frozenset({"runs", "missing"})
    step: str | None = None
    runs: list[str] | None = None
    missing: list[str] | None = None


@_kind("sweep")
class Sweep(Event):
    """a sweeper queued stalled runs (`queued`)"""

    queued: list[str] | None = None


@_kind("sweep.race")
class SweepRace(Event):
    """two sweepers raced (`queued`, one list per sweeper)"""

    stalled: list[str] | None = None
    queued: list[list[str]] | None = None


@_kind("run.evidence")
class RunEvidence(Event):
    """what was gathered of a run after it ended (`final`, `final_raw`, `own_effects`, `incarnations`,
    `limit`, `leftovers`, `options`); the records below follow it, each with `of` = this event's `i`"""

    final: dict | None = None
    final_raw: str | None = None
    own_effects: list | None = None
    incarnations: list[dict] | None = None
    limit: str | None = None
    leftovers: list[str] | None = None
    options: dict | None = None
    """The run's knobs, the baseline's volatile fields, the replay metadata and the scenario's extras, in one
    JSON object (`killpoint.checkers.options.split` tells them apart)."""
    crashes: dict[str, dict] | None = None
    notes: list[str] | None = None
    """What the runtime's own records show it did that explains a failure (`Adapter.notes`); written only
    when there is some."""
    refused: dict[str, str] | None = None
    """Workers that exited non-zero without a traceback whose log's end says the database refused them a
    connection for want of slots (`checkers.refused`): incarnation id -> that line; written only when some did."""
    OPTIONAL = frozenset({"notes", "refused"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Record(Event):
    """A record gathered after a run (service or database side), not part of its control trace."""

    of: int | None = None
    """The `i` of the run's `run.evidence` event this record belongs to."""


@_kind("checkpoint.write")
class CheckpointWrite(Record):
    """a committed checkpoint write, from the audit trigger (`seq`, `cursor`, `status`, `app`)"""

    seq: int | None = None
    cursor: str | None = None
    status: str | None = None
    app: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceRecord(Record):
    """A record of a fake service, as the service journalled it."""

    record: Mapping[str, Any] | None = None


@_kind("attempt")
class Attempt(ServiceRecord):
    """a request a fake service received (`service`, `key`, `payload`...)"""


@_kind("effect")
class Effect(ServiceRecord):
    """an effect a fake service applied (`service`, `key`, `id`, `payload`...)"""


@_kind("model.request")
class ModelRequest(ServiceRecord):
    """a request the fake model answered (`messages`, `answer`, `usage`...)"""


@_kind("verdict")
class Judged(Event):
    """a trial judged (`outcome`, `checkers`, `baseline`, `verdicts`, `failing`)"""

    outcome: str | None = None
    schedule: str | None = None
    seed: int | None = None
    checkers: list[str] | None = None
    baseline: str | None = None
    verdicts: list[dict] | None = None
    failing: list[str] | None = None


@_kind("session.interrupted")
class SessionInterrupted(Event):
    """the session was interrupted (Ctrl-C or SIGTERM) before it finished"""

    by: str | None = None


EVENT_KINDS: dict[str, str] = {name: " ".join((cls.__doc__ or "").split()) for name, cls in EVENT_TYPES.items()}
"""Every kind of event the harness writes, and what it carries besides `i`, `t`, `type` and `run_id`."""


def encode(event: Event) -> dict[str, Any]:
    """The JSON object of `event` (module docstring, step 3)."""
    out: dict[str, Any] = {"type": event.kind}
    optional = event.OPTIONAL
    for key in event.KEYS:
        value = getattr(event, key)
        if value is not None or key not in optional:
            out[key] = value
    out.update(event.extra)
    return out


def decode(obj: Mapping[str, Any]) -> Event | None:
    """The event of a JSON object of the history, or None when its `type` names no kind (step 3). The values
    are taken as they are: a corrupt line's odd values are the reader's to reject."""
    kind = obj.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return None
    declared = cls.DECLARED
    known: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in obj.items():
        if key in declared:
            known[key] = value
        elif key != "type":
            extra[key] = value
    return cls(extra=extra, **known)
