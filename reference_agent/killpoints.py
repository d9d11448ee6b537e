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
``checkpoint.committed``. Notes: ``worker.start``, ``drain.signal``, ``drain.yield``, ``fenced``,
``lease.busy``, ``lease.lost``, ``refused.newer``, ``refused.incompatible``, ``run.done``.

Signals: a SIGTERM that arrives while the worker is blocked reading the answer runs its Python handler
and the read resumes (PEP 475), so the handler must only set flags. A handler may call :func:`note`;
if it interrupted a connect or a write in progress, the note is queued and written after it, so lines never
interleave.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

HARNESS_GONE_EXIT = 70

POINTS = ("step.start", "effect.responded", "checkpoint.writing", "checkpoint.committed")


class _Channel:
    """The one connection of this process to the harness (re-opened after a fork)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        self.reader: Any = None
        self.busy = False  # connecting or writing: a signal handler's note must wait
        self.pending: list[bytes] = []

    def ensure(self, path: str) -> None:
        if self.busy or (self.sock is not None and self.pid == os.getpid()):
            return
        # A forked child must not share its parent's socket: open its own.
        self.busy = True
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
            except OSError as exc:
                _gone(f"cannot reach kill-point socket {path}: {exc}")
            self.sock, self.reader, self.pid = sock, sock.makefile("rb"), os.getpid()
        finally:
            self.busy = False

    def send(self, line: bytes) -> None:
        if self.busy or self.sock is None or self.pid != os.getpid():
            # Re-entered from a signal handler in the middle of a connect or a write: send after it.
            self.pending.append(line)
            return
        self.busy = True
        try:
            assert self.sock is not None
            self.sock.sendall(line)
            while self.pending:
                self.sock.sendall(self.pending.pop(0))
        except OSError as exc:
            _gone(f"kill-point socket write failed: {exc}")
        finally:
            self.busy = False

    def read_line(self) -> bytes:
        try:
            return self.reader.readline()
        except OSError as exc:
            _gone(f"kill-point socket read failed: {exc}")
            raise  # unreachable


_channel = _Channel()


def _gone(why: str) -> None:
    sys.stderr.write(f"killpoint: harness gone ({why}); exiting {HARNESS_GONE_EXIT}\n")
    sys.stderr.flush()
    os._exit(HARNESS_GONE_EXIT)


def enabled() -> bool:
    """True when this process runs under the harness (``KILLPOINT_SOCKET`` is set)."""
    return bool(os.environ.get("KILLPOINT_SOCKET"))


def _message(kind: str, fields: dict[str, Any]) -> bytes:
    msg = {"v": 1, "kind": kind, **fields, "pid": os.getpid(),
           "incarnation": os.environ.get("KILLPOINT_INCARNATION", "")}
    return (json.dumps(msg, separators=(",", ":"), default=str) + "\n").encode()


def report(point: str, run_id: str, step: str, seq: int) -> None:
    """Report reaching ``point`` and block until the harness says go (no-op outside the harness)."""
    path = os.environ.get("KILLPOINT_SOCKET")
    if not path:
        return
    _channel.ensure(path)
    _channel.send(_message("point", {"point": point, "run_id": run_id, "step": step, "seq": seq}))
    line = _channel.read_line()
    if not line:
        _gone("EOF while waiting at " + point)
    try:
        answer = json.loads(line)
    except ValueError:
        _gone(f"unreadable answer {line!r}")
        return
    if not (isinstance(answer, dict) and answer.get("go") is True):
        _gone(f"unexpected answer {answer!r}")


def note(name: str, **fields: Any) -> None:
    """Send a non-blocking note ``name`` with ``fields`` (no-op outside the harness)."""
    path = os.environ.get("KILLPOINT_SOCKET")
    if not path:
        return
    _channel.ensure(path)
    _channel.send(_message("note", {"note": name, **fields}))
