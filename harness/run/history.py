"""The history: one append-only journal of every event of a session, in memory and as JSONL on disk.

Every event gets `i` (its index), `t` (monotonic seconds since the history began) and `type`, one of
`EVENT_KINDS` (one class per kind, harness/events.py; docs/contracts.md section 6 lists the same
kinds). Writers may be any thread; appends are serialised and each line is flushed, so a harness that dies
mid-run still leaves a readable journal up to its last event. An event is kept in memory exactly as it
reads back from the file (a JSON round trip into its class), so a checker judging the in-memory history
and `killpoint judge` reading the file see the same values.
"""

from __future__ import annotations

import bisect
import json
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from killpoint.events import EVENT_KINDS, EVENT_TYPES, Event, Record, RunEvidence, decode, encode

__all__ = ["EVENT_KINDS", "EVIDENCE_KINDS", "TRACE_FIELDS", "Event", "History", "trace"]

EVIDENCE_KINDS = frozenset(kind for kind, cls in EVENT_TYPES.items() if issubclass(cls, Record))
"""Records gathered after a run (service and database side), not part of its control trace."""

TRACE_FIELDS = ("type", "inc", "step", "point", "action", "nth", "note", "exit_code", "signal", "seq",
                "cursor", "status", "service", "outcome", "key")
"""Fields that make up the event trace: what happened, without times, pids or ports."""


SHARED_STRING_MAX = 64
"""Strings up to this length in an event (its keys, and values such as run ids, incarnation ids, steps and
points) are interned: a session repeats them in thousands of events, which then share one copy."""


def _shared(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """One JSON object of an event, its keys and short string values interned (`SHARED_STRING_MAX`)."""
    intern = sys.intern
    return {intern(k): (intern(v) if type(v) is str and len(v) <= SHARED_STRING_MAX else v) for k, v in pairs}


def _parse(line: str) -> Any:
    return json.loads(line, object_pairs_hook=_shared)


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def as_read(event: Event) -> Event:
    """`event` as a history would hold it once recorded, `i` and `t` aside: its JSON line read back."""
    read = decode(_parse(_line(encode(event))))
    assert read is not None  # an event's own kind
    return read


class History:
    """Append-only event journal. `add(event)` records a typed event (harness/events.py), `append(kind,
    **fields)` builds one of kind `kind` from its JSON fields; both return the event as stored.

    Reads that a trial makes on the hot path cost what they return, not the session's length: `of_run`
    (one run's events, kept per run id as they are appended) and `since` (the events after an index).
    A session of thousands of trials would otherwise rescan everything before it on every trial. The
    events are held in memory for the session, their repeated short strings shared (`_shared`).
    """

    def __init__(self, path: Path | None = None) -> None:
        self._events: list[Event] = []  # the events not forgotten, in order of `i`
        self._count = 0  # every event appended, forgotten or not: the next `i`
        self._by_run: dict[str, list[Event]] = {}
        self._forgotten: set[int] = set()  # `i` of forgotten events still in `_events` (see `forget`)
        self._kinds: set[str] = set()  # every kind ever appended
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._file: TextIO | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self.failed: OSError | None = None
        """The first error writing the journal's file (a disk that filled up): from then on the events are kept
        in memory only, and `close` raises it, on the thread that closes the history. Writers are often a
        fork server's reader thread or a fake service's: raising there would end that thread, not the run."""

    def append(self, type_: str, **fields: Any) -> Event:
        """Record an event of kind `type_` with these JSON fields (the kind's class, built from them)."""
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown history event kind {type_!r}: add its class to harness/events.py "
                             "and docs/contracts.md")
        return self._write(type_, fields)

    def add(self, event: Event) -> Event:
        """Record `event` (its `i` and `t` are the history's to give) and return it as stored."""
        fields = encode(event)
        for key in ("type", "i", "t"):
            fields.pop(key, None)
        return self._write(event.kind, fields)

    def _write(self, kind: str, fields: dict[str, Any]) -> Event:
        with self._lock:
            obj: dict[str, Any] = {"i": self._count, "t": round(time.monotonic() - self._t0, 6), "type": kind}
            obj.update(fields)
            line = _line(obj)
            event = decode(_parse(line))  # what a reader of the file gets, its repeated strings shared
            if event is None:  # its fields named another `type`
                raise ValueError(f"the fields of a {kind!r} event name the unknown type {obj['type']!r}")
            self._events.append(event)
            self._count += 1
            self._kinds.add(kind)
            if event.run_id is not None:
                self._by_run.setdefault(str(event.run_id), []).append(event)
            if self._file is not None and self.failed is None:
                try:
                    self._file.write(line + "\n")
                    self._file.flush()
                except OSError as exc:
                    self.failed = exc
            return event

    def events(self, type_: str | None = None) -> list[Event]:
        """The events held (all but those of forgotten runs), of kind `type_` if given, in journal order."""
        with self._lock:
            gone = self._forgotten
            return [e for e in self._events if (type_ is None or e.kind == type_) and e.i not in gone]

    def seen(self, type_: str) -> bool:
        """Whether an event of kind `type_` was ever appended (forgotten or not)."""
        with self._lock:
            return type_ in self._kinds

    def forget(self, run_id: str) -> None:
        """Stop holding `run_id`'s events in memory (the file keeps them): a harness forgets each run once
        it is judged, so a long exploration's memory stays flat. `of_run` then finds nothing of it; `since`,
        `events` and iteration skip its events; `len` and every `i` are unchanged. Costs the run's own
        events: the list of all events drops forgotten ones in batches, once they are half of it."""
        with self._lock:
            gone = self._by_run.pop(run_id, [])
            self._forgotten.update(e.i for e in gone)
            if self._forgotten and 2 * len(self._forgotten) >= len(self._events):
                self._events = [e for e in self._events if e.i not in self._forgotten]
                self._forgotten = set()

    def of_run(self, run_id: str, type_: str | None = None) -> list[Event]:
        """The events of `run_id` (of kind `type_` if given), in journal order."""
        with self._lock:
            return [e for e in self._by_run.get(run_id, ()) if type_ is None or e.kind == type_]

    def since(self, index: int) -> list[Event]:
        """The events appended at or after position `index` (an earlier `len(history)`), those of forgotten
        runs left out."""
        with self._lock:
            start = bisect.bisect_left(self._events, index, key=lambda e: e.i)
            gone = self._forgotten
            return [e for e in self._events[start:] if e.i not in gone]

    def __len__(self) -> int:
        """How many events were appended (forgotten ones included): the next event's `i`."""
        with self._lock:
            return self._count

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def close(self) -> None:
        """Close the file; raise the first error writing it (`failed`), if there was one."""
        with self._lock:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:  # the last flush of a full disk
                    self.failed = self.failed or exc
                self._file = None
            if self.failed is not None:
                raise self.failed

    @staticmethod
    def load(path: Path) -> list[Event]:
        """Read a journal written by a History (a torn or corrupt line is skipped; see `read`)."""
        return History.read(path)[0]

    @staticmethod
    def read(path: Path) -> tuple[list[Event], int]:
        """The events of a journal and how many lines could not be read (a SIGKILLed harness tears its
        last line by nature; a line that is no JSON object of a known `type` is not an event either)."""
        events: list[Event] = []
        bad = 0
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    obj = _parse(line)
                except json.JSONDecodeError:
                    bad += 1
                    continue
                event = decode(obj) if isinstance(obj, dict) else None
                if event is None:
                    bad += 1
                else:
                    events.append(event)
        return events, bad


def trace(events: Iterable[Event], replace: dict[str, str] | None = None) -> list[tuple]:
    """The event trace: each event's TRACE_FIELDS, in order, with run ids replaced by placeholders.

    Two runs of the same schedule have the same trace; their times, pids and ports differ.
    """
    out = []
    for e in events:
        if isinstance(e, (Record, RunEvidence)):
            continue  # gathered evidence; compared by the checkers, not part of the control trace
        row = []
        for f in TRACE_FIELDS:
            v = e.get(f)
            if isinstance(v, str) and replace:
                for old, new in replace.items():
                    v = v.replace(old, new)
            row.append(v)
        out.append(tuple(row))
    return out
