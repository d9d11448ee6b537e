"""Reading a file under `.killpoint/` that anyone may have planted: only a regular file of bounded size,
never waiting on a FIFO or reading a device without end (the failure store and the checkpoint store)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_FILE_BYTES = 1 << 20
"""The largest file under `.killpoint/` that is read (what killpoint writes there is a few kB)."""


def read_bounded(path: Path, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of `path` if it is (or links to) a regular file of at most `limit` bytes; else None. Opened
    without blocking (a FIFO never waits for a writer) and checked on the open file, not the name."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)
