"""The history: one append-only journal of every event of a run, in memory and as JSONL on disk.

Every event gets `i` (its index), `t` (monotonic seconds since the history began) and `type`. Writers
may be any thread; appends are serialised and each line is flushed, so a harness that dies mid-run
still leaves a readable journal up to its last event.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

Event = dict[str, Any]

TRACE_FIELDS = ("type", "inc", "step", "point", "action", "nth", "note", "exit_code", "signal", "seq",
                "cursor", "status", "service", "outcome", "key")
"""Fields that make up the event trace: what happened, without times, pids or ports."""


class History:
    """Append-only event journal. `append` returns the stored event."""

    def __init__(self, path: Path | None = None) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._file: TextIO | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def append(self, type_: str, **fields: Any) -> Event:
        with self._lock:
            event: Event = {"i": len(self._events), "t": round(time.monotonic() - self._t0, 6), "type": type_}
            event.update(fields)
            self._events.append(event)
            if self._file is not None:
                self._file.write(json.dumps(event, sort_keys=True, default=str) + "\n")
                self._file.flush()
            return event

    def events(self, type_: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self._events if type_ is None or e["type"] == type_]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    @staticmethod
    def load(path: Path) -> list[Event]:
        """Read a journal written by a History."""
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]


def trace(events: Iterable[Event], replace: dict[str, str] | None = None) -> list[tuple]:
    """The event trace: each event's TRACE_FIELDS, in order, with run ids replaced by placeholders.

    Two runs of the same schedule have the same trace; their times, pids and ports differ.
    """
    out = []
    for e in events:
        if e["type"] in ("attempt", "effect", "model.request"):
            continue  # service-side evidence; compared by the checkers, not part of the control trace
        row = []
        for f in TRACE_FIELDS:
            v = e.get(f)
            if isinstance(v, str) and replace:
                for old, new in replace.items():
                    v = v.replace(old, new)
            row.append(v)
        out.append(tuple(row))
    return out
