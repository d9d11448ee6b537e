"""Where a long session puts what it will write at the end but need not hold until then.

A `Spool` is an unnamed, append-only file of JSON lines (a `tempfile.TemporaryFile`, made in the run
directory: it is unlinked at once, so nothing is left behind, whatever ends the process). `add` writes one
record and returns where it starts; `read` gives it back. Trials judged at the same time (`-j`) share one
spool: both calls hold its lock. A CLI session spools a passing trial's verdicts and notes once it is judged
(`Trial.spool`), so its memory stays flat however many trials it runs; `verdicts.json` is assembled from the
spool at the end (or when interrupted).
"""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path
from typing import Any


class Spool:
    """An append-only file of JSON records, read back by the offset `add` returned."""

    def __init__(self, folder: Path | None = None) -> None:
        self._file = tempfile.TemporaryFile(dir=folder if folder is not None and folder.is_dir() else None)
        self._lock = threading.Lock()

    def add(self, record: Any) -> int:  # noqa: ANN401 - any JSON value
        """Append `record` (one JSON line); its offset, for `read`."""
        line = json.dumps(record).encode() + b"\n"
        with self._lock:
            offset = self._file.seek(0, 2)
            self._file.write(line)
            return offset

    def read(self, offset: int) -> Any:  # noqa: ANN401 - any JSON value
        """The record `add` wrote at `offset`."""
        with self._lock:
            self._file.flush()
            self._file.seek(offset)
            return json.loads(self._file.readline())

    def close(self) -> None:
        """Drop the file (its records can no longer be read)."""
        self._file.close()
