"""The barrier server's `caught_up`: a fake service that calls it before recording a request records it after
every report its worker wrote first, though notes are unanswered and arrive on another socket and thread."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env.barrier import BarrierServer


class Recorder:
    """A barrier whose note handler can be held (at a note named `hold`) and whose point handler holds every
    point until `release` is set."""

    def __init__(self, path: Path, hold: str = "") -> None:
        self.hold = hold
        self.notes: list[str] = []
        self.in_note = threading.Event()
        self.in_point = threading.Event()
        self.started = threading.Event()
        self.release = threading.Event()
        self.server = BarrierServer(path, self._point, self._note)

    def _note(self, msg: dict) -> None:
        if msg["note"] == self.hold:
            self.in_note.set()
            self.release.wait(timeout=30)
        self.notes.append(msg["note"])
        self.started.set()

    def _point(self, msg: dict) -> bool:
        self.in_point.set()
        return self.release.wait(timeout=30)


@pytest.fixture
def sock_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bar")


@pytest.fixture
def client() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for s in made:
        s.close()


def connect(rec: Recorder, made: list[socket.socket]) -> socket.socket:
    """A worker's connection, accepted and read (its first note handled) before this returns."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(rec.server.path))
    made.append(s)
    s.sendall(line("note", note="worker.start"))
    assert rec.started.wait(timeout=10) and rec.notes == ["worker.start"]  # accepted, read and handled
    return s


def line(kind: str, **fields: object) -> bytes:
    return (json.dumps({"v": 1, "kind": kind, **fields}) + "\n").encode()


@pytest.mark.parametrize("together", [True, False], ids=["read-unhandled", "unread-in-socket"])
def test_caught_up_waits_for_the_notes_a_worker_wrote_before(sock_dir: Path, client: list[socket.socket],
                                                             together: bool) -> None:
    """The reader is held in the first note's handler; the second is either read with it and not handled
    (`together`: one write) or still in the socket, no reader having taken it: either way not caught up."""
    rec = Recorder(sock_dir / "kp.sock", hold="drain.signal")
    try:
        s = connect(rec, client)
        second = line("note", note="drain.yield")
        s.sendall(line("note", note="drain.signal") + (second if together else b""))
        assert rec.in_note.wait(timeout=10)
        if not together:
            s.sendall(second)
        assert rec.server.caught_up(timeout=0.2) is False
        rec.release.set()
        assert rec.server.caught_up(timeout=10) is True
        assert rec.notes == ["worker.start", "drain.signal", "drain.yield"]
    finally:
        rec.release.set()
        rec.server.close()


def test_a_worker_held_at_a_point_is_caught_up(sock_dir: Path, client: list[socket.socket]) -> None:
    """A worker waiting for its point's answer writes nothing more; the handler may be waiting for the caller."""
    rec = Recorder(sock_dir / "kp.sock")
    try:
        s = connect(rec, client)
        s.sendall(line("point", point="step.start", step="plan"))
        assert rec.in_point.wait(timeout=10)
        assert rec.server.caught_up(timeout=10) is True
        rec.release.set()
        assert s.makefile("rb").readline() == b'{"go": true}\n'
    finally:
        rec.release.set()
        rec.server.close()


def test_a_last_line_without_its_newline_is_handled(sock_dir: Path, client: list[socket.socket]) -> None:
    rec = Recorder(sock_dir / "kp.sock")
    try:
        s = connect(rec, client)
        s.sendall(line("note", note="run.done").rstrip(b"\n"))
        # Read but not handled (its end may follow): not caught up. Before, the server counted a line read
        # without its newline as nothing left, so caught_up said yes before the end of file handled it.
        assert rec.server.caught_up(timeout=0.5) is False
        s.shutdown(socket.SHUT_WR)
        assert rec.server.caught_up(timeout=10) is True
        assert rec.notes == ["worker.start", "run.done"]
    finally:
        rec.server.close()
