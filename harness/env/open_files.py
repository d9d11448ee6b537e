"""The files a black-box worker's child opened for writing, flushed at its end as an interpreter's shutdown
flushes them.

A fresh `python worker.py` that exits (returns, `sys.exit`, an uncaught exception, a KeyboardInterrupt)
finalizes its objects: a buffered file still open (`journal = open(path, "a")` kept in a global, written,
never closed) is flushed then. A child that `pymain` runs ends with `os._exit` (a fork server's copy must
not finalize the server's state), which drops what such a file still buffers: a worker that writes its
paused marker that way on SIGTERM, and reads it on resume, would lose it only under killpoint.

1. `track()`, in the child before the worker runs: `open` (`builtins.open`, `io.open` and `_io.open`,
   through which `os.fdopen`, `pathlib.Path.open` and `tempfile` open) notes each file it opens in a mode
   that writes, weakly (a file the worker drops is finalized, and flushed, by its own reference count as
   before).
2. `flush()`, at the child's end after its `atexit` handlers (the order of `Py_FinalizeEx`): each noted
   file still open is flushed; an error is ignored, as finalization ignores it. Then every C `FILE *`
   stream (`fflush(NULL)`), as the C runtime's `exit` does after the interpreter's end: a C library's
   buffered writes.
"""

from __future__ import annotations

import _io
import builtins
import contextlib
import ctypes
import functools
import io
import weakref
from typing import Any

_opened: weakref.WeakSet[Any] = weakref.WeakSet()
_WRITES = frozenset("wax+")


def track() -> None:
    """Flow step 1. Call once, in the child."""
    real = io.open

    @functools.wraps(real)
    def open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:  # noqa: A001 - stands in for it
        f = real(file, mode, *args, **kwargs)
        if isinstance(mode, str) and not _WRITES.isdisjoint(mode):
            with contextlib.suppress(TypeError):  # an object that takes no weak reference: not a file of io's
                _opened.add(f)
        return f

    builtins.open = io.open = _io.open = open


def flush() -> None:
    """Flow step 2."""
    for f in list(_opened):
        with contextlib.suppress(Exception):
            if not f.closed:
                f.flush()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)
