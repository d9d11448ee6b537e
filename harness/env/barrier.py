"""The harness side of the kill-point wire protocol (docs/contracts.md section 1).

A `BarrierServer` listens on a unix socket. Each worker connection gets a reader thread; a `point`
report is handed to `on_point(msg)`, which may block for as long as the harness holds the worker
there, and returns True to answer `{"go": true}` or False to leave the worker waiting (it is being
killed). `note` reports go to `on_note(msg)` and get no answer. Closing the server closes every
connection, which a conforming worker takes as "harness gone" and exits.

A worker's last reports (a `run.done` note, say) may still be in its socket when its exit is reported
by another thread: `settle(pid)` waits until the connection of process `pid` has been read to its end,
so the harness records a process's end after everything the process said.

A note is not answered, so the worker goes on at once: a note its SIGTERM handler sends (``drain.signal``)
and the HTTP request it makes next reach the harness on two sockets, read by two threads. `caught_up()`
waits until every report the workers had written when it is called has been handled, so that a fake
service calls it before it records a request and the journal keeps each worker's own order (a note it
wrote, then the request it sent).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import socket
import struct
import termios
import threading
from collections.abc import Callable
from pathlib import Path

from killpoint.errors import EnvironmentProblem

PointHandler = Callable[[dict], bool]
NoteHandler = Callable[[dict], None]


class _Peer:
    """The state of one worker connection: whether its reader is inside a point handler, how many lines it
    has read and not yet handled, and whether it has read the connection to its end."""

    def __init__(self) -> None:
        self.busy = False
        self.unhandled = 0
        self.closed = False


def _unread(conn: socket.socket) -> int:
    """The bytes waiting in `conn`'s receive queue (SIOCINQ); 0 once it is closed."""
    try:
        return int.from_bytes(fcntl.ioctl(conn.fileno(), termios.FIONREAD, b"\0\0\0\0"), "little")
    except (OSError, ValueError):
        return 0


def _peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end of a unix socket (Linux SO_PEERCRED), or None."""
    try:
        pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              struct.calcsize("3i")))
        return pid
    except (AttributeError, OSError):
        return None


SOCKET_PATH_MAX = 107
"""The longest path a unix socket may have on Linux (sun_path is 108 bytes with its NUL)."""


class BarrierServer:
    """Unix-socket server for kill-point reports. Use as a context manager or call close(). A `path` too long
    for a socket is refused in one line naming TMPDIR (the folder it is made under, `reaper.clusters_root`)."""

    def __init__(self, path: Path, on_point: PointHandler, on_note: NoteHandler) -> None:
        self.path = path
        self._on_point = on_point
        self._on_note = on_note
        self._live: dict[socket.socket, _Peer] = {}
        self._lock = threading.Lock()
        self._peers: dict[int, _Peer] = {}
        self._changed = threading.Condition(self._lock)
        self._closed = False
        if len(os.fsencode(path)) > SOCKET_PATH_MAX:
            raise EnvironmentProblem(
                "socket-path-too-long", f"the kill-point socket {path} is {len(os.fsencode(path))} bytes long, more "
                f"than the {SOCKET_PATH_MAX} a unix socket path may have",
                "set TMPDIR (or KILLPOINT_PG_ROOT) to a shorter folder, e.g. unset it to use /tmp")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        os.chmod(path, 0o777)  # workers may run as another user
        self._sock.listen(64)
        self._thread = threading.Thread(target=self._accept_loop, name="killpoint-barrier", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            pid, peer = _peer_pid(conn), _Peer()
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._live[conn] = peer
                if pid is not None:
                    self._peers[pid] = peer
            threading.Thread(target=self._serve, args=(conn, pid, peer), name="killpoint-barrier-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket, pid: int | None, peer: _Peer) -> None:
        # Read under the lock, once poll says there is something (so the read does not block): `caught_up`
        # then sees every byte either still in the socket or counted in `peer.unhandled`, never in between.
        poller, rest = select.poll(), b""
        try:
            poller.register(conn, select.POLLIN)
            while True:
                poller.poll()
                with self._lock:
                    data = conn.recv(1 << 16)
                    lines = (rest + data).split(b"\n")
                    rest = lines.pop() if data else b""  # at the end, a last line without its newline counts
                    peer.unhandled = len(lines) + bool(rest)  # a line read without its end is not handled yet
                for raw in lines:
                    self._handle(conn, peer, raw)
                    with self._lock:
                        peer.unhandled -= 1
                        self._changed.notify_all()
                if not data:
                    break
        except (OSError, ValueError):
            pass  # the worker died while we answered (or the server closed); the launcher records its end
        finally:
            with self._lock:
                self._live.pop(conn, None)
                peer.closed = True
                if pid is not None and self._peers.get(pid) is peer:
                    del self._peers[pid]
                self._changed.notify_all()
            with contextlib.suppress(OSError):
                conn.close()

    def _handle(self, conn: socket.socket, peer: _Peer, raw: bytes) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            return
        if msg.get("kind") == "note":
            self._on_note(msg)
            return
        self._set(peer, busy=True)
        try:
            go = self._on_point(msg)
        finally:
            self._set(peer, busy=False)
        if go:
            conn.sendall(b'{"go": true}\n')

    def _set(self, peer: _Peer, busy: bool) -> None:
        with self._lock:
            peer.busy = busy
            self._changed.notify_all()

    def settle(self, pid: int, timeout: float = 5.0) -> None:
        """Wait until everything process `pid` (which has ended) sent has been handled: its connection is
        read to its end, or there is none. A reader inside a point handler counts as settled: the process
        died at that point (the handler may itself be waiting for the end to be recorded)."""
        with self._changed:
            self._changed.wait_for(lambda: (p := self._peers.get(pid)) is None or p.closed or p.busy, timeout)

    def caught_up(self, timeout: float = 2.0) -> bool:
        """Wait until every report the connected workers had written when called has been handled, and say
        whether it was within `timeout`. A reader inside a point handler counts as caught up (its worker
        waits for the answer and writes nothing more; the handler may be waiting for the caller)."""
        def read() -> bool:
            return all(p.closed or p.busy or (p.unhandled == 0 and not _unread(c)) for c, p in self._live.items())
        with self._changed:
            return self._changed.wait_for(read, timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._live)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                c.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __enter__(self) -> BarrierServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
