"""Worker side of the kill-point wire protocol (contracts.md section 1).

A worker under the harness finds two environment variables:

``KILLPOINT_SOCKET``
    path of a unix stream socket the harness listens on.
``KILLPOINT_INCARNATION``
    an opaque id of this incarnation, echoed back in every message.

Without ``KILLPOINT_SOCKET`` every function here is a no-op, so a worker runs normally outside the harness.

The connection is opened lazily, on the first message, and kept for the life of the process. Each message
is one line of UTF-8 JSON ending in ``\\n``. A *point* report::

    {"v": 1, "kind": "point", "point": "step.start", "run_id": "r-1", "step": "email", "seq": 3,
     "pid": 4242, "incarnation": "i2"}

blocks until the harness answers one line ``{"go": true}``. The harness may never answer (it kills or
stops the worker while it waits). A *note* (``"kind": "note"``, with ``"note": NAME`` and free fields) is
sent without waiting for an answer.

If the socket cannot be reached, or reaches EOF while the worker waits, the harness is gone and the
process exits at once with code 70 (``os._exit``: no cleanup, no further effects).

Points the reference runtime reports: ``step.start``, ``effect.responded``, ``checkpoint.writing``,
``checkpoint.committed``. Notes: ``worker.start``, ``drain.signal``, ``drain.yield``, ``drain.deadline``,
``fenced``, ``lease.busy``, ``lease.lost``, ``refused.newer``, ``refused.incompatible``, ``run.done``.

Threads: the functions here are safe to call from any thread (a step may use threads, or asyncio's
executor). A point is one exchange -- write the line, read the answer -- and only one exchange is in flight
per process: a second thread reporting a point waits until the first has its answer, then sends its own.
Writes are serialized apart from that, so a note from another thread goes out at once, even while a point
waits for its answer, and lines never interleave.

Signals: a SIGTERM that arrives while the worker is blocked reading the answer runs its Python handler
and the read resumes (PEP 475), so the handler must only set flags. A handler may call :func:`note`;
if it interrupted a connect or a write of the same thread, the note is queued and written right after it,
so lines never interleave. A handler must not call :func:`report` (it raises ``RuntimeError`` if it
interrupted a report of its own thread). After a fork the child opens its own connection.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from typing import Any

HARNESS_GONE_EXIT = 70

POINTS = ("step.start", "effect.responded", "checkpoint.writing", "checkpoint.committed")


class _Channel:
    """The one connection of this process to the harness (re-opened after a fork).

    ``exchange`` (re-entrant) is held by the thread whose point is in flight, from its write to its answer;
    ``write`` (re-entrant) is held while connecting and writing. Re-entrant, so that a signal handler
    interrupting its own thread gets in at once instead of deadlocking; ``writing`` / ``exchanging`` then
    tell it that it interrupted: a note is queued in ``pending`` (flushed by the interrupted writer before
    it lets go), a point is refused.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self.path: str | None = None
        self.sock: socket.socket | None = None
        self.reader: Any = None
        self.exchange = threading.RLock()
        self.exchanging = False
        self.write = threading.RLock()
        self.writing = False  # connecting or writing: a signal handler's note must wait
        self.pending: list[bytes] = []

    def _connect(self, path: str, quietly: bool = False) -> None:
        """Connect to `path` unless this process is connected to it already (`quietly`: a socket that
        cannot be reached leaves the channel unconnected instead of ending the process)."""
        if self.sock is not None and self.pid == os.getpid() and self.path == path:
            return
        if self.sock is not None and self.pid == os.getpid():  # opened ahead, to another socket
            self.sock.close()
            self.sock = None
        # A forked child must not share its parent's socket: open its own.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            if quietly:
                return
            _gone(f"cannot reach kill-point socket {path}: {exc}")
        self.sock, self.reader, self.pid, self.path = sock, sock.makefile("rb"), os.getpid(), path

    def connect_ahead(self, path: str) -> None:
        """Connect now, before any message (see :func:`connect_ahead`)."""
        with self.write:
            self._connect(path, quietly=True)

    def send(self, path: str, line: bytes) -> None:
        """Write one line (connecting first if needed), from any thread."""
        with self.write:
            if self.writing:
                # Re-entered from a signal handler in the middle of this thread's connect or write: the
                # interrupted writer sends it after its own line.
                self.pending.append(line)
                return
            self.writing = True
            try:
                self._connect(path)
                assert self.sock is not None
                self.sock.sendall(line)
                while True:
                    while self.pending:
                        self.sock.sendall(self.pending.pop(0))
                    self.writing = False
                    if not self.pending:  # a handler that ran after the loop and before this queued nothing
                        break
                    self.writing = True
            except OSError as exc:
                _gone(f"kill-point socket write failed: {exc}")
            finally:
                self.writing = False

    def ask(self, path: str, line: bytes, point: str) -> bytes:
        """Send a point's line and return the answer line; one exchange at a time per process."""
        with self.exchange:
            if self.exchanging:
                raise RuntimeError(f"kill point {point!r} reported from a signal handler that interrupted a report")
            self.exchanging = True
            try:
                self.send(path, line)
                try:
                    return self.reader.readline()
                except OSError as exc:
                    _gone(f"kill-point socket read failed: {exc}")
                    raise  # unreachable
            finally:
                self.exchanging = False


_channel = _Channel()


def _reset_after_fork() -> None:
    """In a forked child: a fresh channel (the parent's locks may be held by threads the child lacks)."""
    global _channel
    _channel = _Channel()


os.register_at_fork(after_in_child=_reset_after_fork)


def _gone(why: str) -> None:
    sys.stderr.write(f"killpoint: harness gone ({why}); exiting {HARNESS_GONE_EXIT}\n")
    sys.stderr.flush()
    os._exit(HARNESS_GONE_EXIT)


def _message(kind: str, fields: dict[str, Any]) -> bytes:
    msg = {"v": 1, "kind": kind, **fields, "pid": os.getpid(),
           "incarnation": os.environ.get("KILLPOINT_INCARNATION", "")}
    return (json.dumps(msg, separators=(",", ":"), default=str) + "\n").encode()


def report(point: str, run_id: str, step: str, seq: int) -> None:
    """Report reaching ``point`` and block until the harness says go (no-op outside the harness)."""
    path = os.environ.get("KILLPOINT_SOCKET")
    if not path:
        return
    line = _channel.ask(path, _message("point", {"point": point, "run_id": run_id, "step": step, "seq": seq}), point)
    if not line:
        _gone("EOF while waiting at " + point)
    try:
        answer = json.loads(line)
    except ValueError:
        _gone(f"unreadable answer {line!r}")
        return
    if not (isinstance(answer, dict) and answer.get("go") is True):
        _gone(f"unexpected answer {answer!r}")


def connect_ahead() -> None:
    """Open this process's connection to the harness now rather than on its first message: a process
    forked ahead of the incarnation it will become (the harness's standby, harness/env/forkserver.py) does
    it before it is one, so the incarnation's first note does not wait for the connection. The harness
    knows a connection by the pid at its other end, which the process keeps when it becomes the
    incarnation. A socket that cannot be reached now is left for the first message to meet; a message for
    another socket (`KILLPOINT_SOCKET` changed) closes this connection and opens its own."""
    path = os.environ.get("KILLPOINT_SOCKET")
    if path:
        _channel.connect_ahead(path)


def note(name: str, **fields: Any) -> None:
    """Send a non-blocking note ``name`` with ``fields`` (no-op outside the harness)."""
    path = os.environ.get("KILLPOINT_SOCKET")
    if not path:
        return
    _channel.send(path, _message("note", {"note": name, **fields}))
