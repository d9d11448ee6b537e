"""The harness side of the kill-point wire protocol (docs/contracts.md section 1).

A `BarrierServer` listens on a unix socket. Each worker connection gets a reader thread; a `point`
report is handed to `on_point(msg)`, which may block for as long as the harness holds the worker
there, and returns True to answer `{"go": true}` or False to leave the worker waiting (it is being
killed). `note` reports go to `on_note(msg)` and get no answer. Closing the server closes every
connection, which a conforming worker takes as "harness gone" and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

PointHandler = Callable[[dict], bool]
NoteHandler = Callable[[dict], None]


class BarrierServer:
    """Unix-socket server for kill-point reports. Use as a context manager or call close()."""

    def __init__(self, path: Path, on_point: PointHandler, on_note: NoteHandler) -> None:
        self.path = path
        self._on_point = on_point
        self._on_note = on_note
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
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
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="killpoint-barrier-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn.makefile("rb") as reader:
                for raw in reader:
                    try:
                        msg = json.loads(raw)
                    except ValueError:
                        continue
                    if msg.get("kind") == "note":
                        self._on_note(msg)
                        continue
                    if self._on_point(msg):
                        conn.sendall(b'{"go": true}\n')
        except OSError:
            pass  # the worker died while we answered; its end is recorded by the launcher
        finally:
            with self._lock:
                self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._conns)
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
