"""The worker side of the kill-point wire protocol."""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from killpoint.reference_agent import killpoints
from tests.helpers import REPO

REPORT = "from reference_agent import killpoints; killpoints.report('step.start', 'r-1', 'plan', 0); print('went')"


def test_no_socket_means_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KILLPOINT_SOCKET", raising=False)
    killpoints.report("step.start", "r-1", "plan", 0)
    killpoints.note("worker.start", run_id="r-1")


def serve_once(path: str, answer: bytes | None) -> tuple[threading.Thread, list[dict]]:
    """Accept one connection, read one line, answer ``answer`` (None: close the connection)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    got: list[dict] = []

    def run() -> None:
        conn, _ = listener.accept()
        got.append(json.loads(conn.makefile("rb").readline()))
        if answer is not None:
            conn.sendall(answer)
        conn.close()
        listener.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize(("answer", "code"), [(b'{"go": true}\n', 0), (None, 70), (b"nonsense\n", 70)])
def test_report_blocks_for_go_and_exits_70_when_the_harness_is_gone(answer: bytes | None, code: int) -> None:
    path = f"/tmp/kp-test-{os.getpid()}.sock"
    Path(path).unlink(missing_ok=True)
    thread, got = serve_once(path, answer)
    try:
        env = {**os.environ, "KILLPOINT_SOCKET": path, "KILLPOINT_INCARNATION": "i7", "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", REPORT], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=30)
        thread.join(10)
    finally:
        Path(path).unlink(missing_ok=True)
    assert done.returncode == code, done.stderr
    assert ("went" in done.stdout) == (code == 0)
    [msg] = got
    assert msg == {"v": 1, "kind": "point", "point": "step.start", "run_id": "r-1", "step": "plan", "seq": 0,
                   "pid": msg["pid"], "incarnation": "i7"}


def test_unreachable_socket_exits_70() -> None:
    env = {**os.environ, "KILLPOINT_SOCKET": "/nonexistent/kp.sock", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", REPORT], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 70 and "harness gone" in done.stderr


AHEAD = """
import os, sys
from reference_agent import killpoints
killpoints.connect_ahead()
print("ahead", flush=True)
line = sys.stdin.readline().strip()
if line:
    os.environ["KILLPOINT_SOCKET"] = line  # the incarnation's socket is another one
killpoints.report("step.start", "r-1", "plan", 0)
print("went", flush=True)
"""
"""A process that connects ahead (as the fork server's standby does), then, once told (and told of another
socket, if the harness's is another), reports a point."""


@pytest.fixture
def sockets() -> Iterator[Callable[[str], socket.socket]]:
    """Listening unix sockets at short paths (a unix socket's path has a 107-byte limit), closed and removed
    after the test."""
    folder = Path(tempfile.mkdtemp(prefix="kp-ahead-"))
    made: list[socket.socket] = []

    def listen(name: str) -> socket.socket:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(folder / name))
        listener.listen(4)
        made.append(listener)
        return listener

    yield listen
    for listener in made:
        listener.close()
    shutil.rmtree(folder, ignore_errors=True)


def ahead_child(path: str) -> subprocess.Popen[str]:
    env = {**os.environ, "KILLPOINT_SOCKET": path, "KILLPOINT_INCARNATION": "i7", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", AHEAD], env=env, cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ahead", child.communicate(timeout=30)
    return child


def answer_one(conn: socket.socket) -> dict:
    """Read one report on `conn` and answer go."""
    msg = json.loads(conn.makefile("rb").readline())
    conn.sendall(b'{"go": true}\n')
    return msg


def test_a_connection_made_ahead_is_the_one_the_reports_use(sockets: Callable[[str], socket.socket]) -> None:
    listener = sockets("kp.sock")
    child = ahead_child(listener.getsockname())
    try:
        listener.settimeout(10)
        conn, _ = listener.accept()  # connected before any message: nothing to read on it yet
        conn.setblocking(False)
        with pytest.raises(BlockingIOError):
            conn.recv(1)
        conn.setblocking(True)
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
        assert answer_one(conn)["pid"] == child.pid
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0 and out.strip() == "went", err
    assert select.select([listener], [], [], 0)[0] == []  # no second connection was made


def test_a_connection_made_ahead_to_another_socket_is_closed_for_the_incarnations(
        sockets: Callable[[str], socket.socket]) -> None:
    old, new = sockets("old.sock"), sockets("new.sock")
    child = ahead_child(old.getsockname())
    try:
        old.settimeout(10)
        new.settimeout(10)
        ahead, _ = old.accept()
        assert child.stdin is not None
        child.stdin.write(new.getsockname() + "\n")
        child.stdin.flush()
        conn, _ = new.accept()
        assert answer_one(conn)["incarnation"] == "i7"
        ahead.settimeout(10)
        assert ahead.recv(1) == b""  # closed, never written to
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0 and out.strip() == "went", err


def test_an_unreachable_socket_ahead_is_left_for_the_first_message_to_meet() -> None:
    """Connecting ahead to a socket that is not there ends nothing: the process goes on (a standby stays a
    standby), and its first report meets the absence as always (exit 70)."""
    env = {**os.environ, "KILLPOINT_SOCKET": "/nonexistent/kp.sock", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", AHEAD], env=env, cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate("\n", timeout=30)
    assert out.split() == ["ahead"] and child.returncode == 70 and "harness gone" in err
