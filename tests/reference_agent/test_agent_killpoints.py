"""The worker side of the kill-point wire protocol."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
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
