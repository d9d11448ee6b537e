"""The kill-point client is safe to call from any thread: one point exchange in flight at a time, notes from
other threads at once, and a note from a signal handler that interrupted a write still delivered whole."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from killpoint.reference_agent import killpoints


class FakeHarness:
    """A unix socket that reads message lines and answers each point with ``{"go": true}`` after
    ``answer_delay`` seconds (from a thread of its own, so a second point sent before the first is answered
    would be seen: ``max_outstanding``). ``read_delay``: wait that long before reading a new connection."""

    def __init__(self, path: str, answer_delay: float = 0.0, read_delay: float = 0.0) -> None:
        self.answer_delay, self.read_delay = answer_delay, read_delay
        self.events: list[tuple[str, dict[str, Any]]] = []  # ("line", msg) | ("answer", msg), in order
        self.outstanding = self.max_outstanding = 0
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(8)
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._spawn(self._accept)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            points: queue.Queue[dict[str, Any] | None] = queue.Queue()
            self._spawn(self._read, conn, points)
            self._spawn(self._answer, conn, points)

    def _read(self, conn: socket.socket, points: queue.Queue[dict[str, Any] | None]) -> None:
        time.sleep(self.read_delay)
        for raw in conn.makefile("rb"):
            msg = json.loads(raw)
            with self._lock:
                self.events.append(("line", msg))
                if msg["kind"] == "point":
                    self.outstanding += 1
                    self.max_outstanding = max(self.max_outstanding, self.outstanding)
            if msg["kind"] == "point":
                points.put(msg)
        points.put(None)

    def _answer(self, conn: socket.socket, points: queue.Queue[dict[str, Any] | None]) -> None:
        while (msg := points.get()) is not None:
            time.sleep(self.answer_delay)
            with self._lock:
                self.outstanding -= 1
                self.events.append(("answer", msg))
            try:
                conn.sendall(b'{"go": true}\n')
            except OSError:
                return

    def lines(self, at_least: int = 0, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The message lines read so far, after waiting (up to ``timeout``) until there are ``at_least``."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                lines = [msg for kind, msg in self.events if kind == "line"]
            if len(lines) >= at_least or time.monotonic() > deadline:
                return lines
            time.sleep(0.01)

    def close(self) -> None:
        self._listener.close()
        for conn in self._conns:
            conn.close()


@pytest.fixture
def socket_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A short socket path (AF_UNIX paths are limited to ~100 bytes), set as KILLPOINT_SOCKET, and a fresh
    channel for this test (the module's channel is per process)."""
    folder = tempfile.mkdtemp(prefix="kp-")
    path = os.path.join(folder, "kp.sock")
    monkeypatch.setenv("KILLPOINT_SOCKET", path)
    monkeypatch.setenv("KILLPOINT_INCARNATION", "i1")
    monkeypatch.setattr(killpoints, "_channel", killpoints._Channel())
    yield path
    sock = killpoints._channel.sock
    if sock is not None:
        sock.close()
    shutil.rmtree(folder, ignore_errors=True)


def run_threads(targets: list[Any], timeout: float = 20.0) -> None:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a reporting thread never got its answer"


def test_two_threads_reporting_at_once_are_both_answered(socket_path):
    harness = FakeHarness(socket_path, answer_delay=0.2)
    try:
        went: list[str] = []
        barrier = threading.Barrier(2)

        def step(name: str) -> Any:
            def run() -> None:
                barrier.wait()
                killpoints.report("step.start", "r-1", name, 0)
                went.append(name)
            return run

        run_threads([step("a"), step("b")])
        assert sorted(went) == ["a", "b"]
        assert sorted(m["step"] for m in harness.lines()) == ["a", "b"]
        assert harness.max_outstanding == 1  # the second point went out only after the first was answered
    finally:
        harness.close()


def test_many_threads_many_points(socket_path):
    harness = FakeHarness(socket_path)
    try:
        def step(name: str) -> Any:
            def run() -> None:
                for seq in range(25):
                    killpoints.report("effect.responded", "r-1", name, seq)
                    killpoints.note("progress", step=name, seq=seq)
            return run

        run_threads([step(f"s{i}") for i in range(4)])
        lines = harness.lines(at_least=4 * 25 * 2)  # the last notes may still be on their way
        assert len(lines) == 4 * 25 * 2
        for name in (f"s{i}" for i in range(4)):
            assert [m["seq"] for m in lines if m["kind"] == "point" and m["step"] == name] == list(range(25))
        assert harness.max_outstanding == 1
    finally:
        harness.close()


def test_a_note_from_another_thread_goes_out_while_a_point_waits(socket_path):
    harness = FakeHarness(socket_path, answer_delay=0.6)
    try:
        reporter = threading.Thread(target=killpoints.report, args=("step.start", "r-1", "plan", 0), daemon=True)
        reporter.start()
        harness.lines(at_least=1)
        started = time.perf_counter()
        killpoints.note("lease.busy", run_id="r-1")
        assert time.perf_counter() - started < 0.3  # not held behind the point's exchange
        reporter.join(10)
        assert not reporter.is_alive()
        assert [(kind, m.get("point") or m.get("note")) for kind, m in harness.events] == [
            ("line", "step.start"), ("line", "lease.busy"), ("answer", "step.start")]
    finally:
        harness.close()


def test_a_note_from_a_signal_handler_during_a_write_is_delivered_after_it(socket_path):
    # The harness reads nothing for a while, so writing a large point blocks in sendall; a signal then
    # interrupts the write and its handler sends a note, which must wait for the whole point line.
    harness = FakeHarness(socket_path, read_delay=0.5)
    seen_writing: list[bool] = []

    def handler(signum: int, frame: Any) -> None:
        seen_writing.append(killpoints._channel.writing)
        killpoints.note("drain.signal", signal="SIGUSR1")

    main = threading.get_ident()
    previous = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.15, signal.pthread_kill, args=(main, signal.SIGUSR1))
    try:
        timer.start()
        killpoints.report("checkpoint.writing", "r-1", "x" * 4_000_000, 7)
        lines = harness.lines(at_least=2)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
        harness.close()
    assert seen_writing == [True]  # the handler did interrupt the write
    assert [(m["kind"], m.get("point") or m.get("note")) for m in lines] == [
        ("point", "checkpoint.writing"), ("note", "drain.signal")]
    assert len(lines[0]["step"]) == 4_000_000 and lines[1]["signal"] == "SIGUSR1"


def test_report_from_a_handler_that_interrupted_a_report_is_refused(socket_path):
    harness = FakeHarness(socket_path, answer_delay=0.3)
    errors: list[BaseException] = []

    def handler(signum: int, frame: Any) -> None:
        try:
            killpoints.report("step.start", "r-1", "nested", 0)
        except RuntimeError as exc:
            errors.append(exc)

    previous = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.1, signal.pthread_kill, args=(threading.get_ident(), signal.SIGUSR1))
    try:
        timer.start()
        killpoints.report("step.start", "r-1", "outer", 0)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
        harness.close()
    assert len(errors) == 1 and "signal handler" in str(errors[0])
    assert [m["step"] for m in harness.lines()] == ["outer"]
