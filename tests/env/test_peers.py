"""env/peers.py: the sender of a request is the live incarnation that owns the client socket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from killpoint.env import peers
from killpoint.env.launcher import Incarnation
from killpoint.env.peers import sender

CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""
IDLE = "import sys; print(0, flush=True); sys.stdin.read()"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.create_server(("127.0.0.1", 0))
    yield srv
    srv.close()


def _spawn(code: str, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()  # the line is the barrier: the socket exists


def test_the_incarnation_holding_the_client_socket_is_the_sender(listener: socket.socket) -> None:
    idle, _ = _spawn(IDLE)
    client, port = _spawn(CLIENT, str(listener.getsockname()[1]))
    conn, peer = listener.accept()
    try:
        a = Incarnation(inc="r#1", run_id="r", role="worker", pid=idle.pid)
        b = Incarnation(inc="r#2", run_id="r", role="successor", pid=client.pid)
        assert peer[1] == int(port)
        assert sender(peer, [a, b]) is b
        assert sender(("127.0.0.1", 1), [a, b]) is None  # nobody's socket
        assert sender(None, [a, b]) is None
    finally:
        conn.close()
        for proc in (idle, client):
            proc.communicate("")


def test_the_socket_is_found_by_its_inode_in_the_kernels_table(listener: socket.socket) -> None:
    """The fast path: the client socket's inode from /proc/net/tcp, held by the client's process only."""
    client, port = _spawn(CLIENT, str(listener.getsockname()[1]))
    conn, peer = listener.accept()
    try:
        inode = peers._inode(*peer)
        assert inode is not None, peer
        assert peers._holds(client.pid, f"socket:[{inode}]")
        assert not peers._holds(os.getpid(), f"socket:[{inode}]")  # this process holds the server end
        assert peers._inode("127.0.0.1", 1) is None and peers._inode("::1", int(port)) is None
    finally:
        conn.close()
        client.communicate("")


def test_a_descendant_of_the_leader_holding_the_socket_is_found_too(listener: socket.socket) -> None:
    """The leader does not hold the socket, its child does: the fallback through the process tree."""
    parent = ("import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1], sys.argv[2]])")
    proc, port = _spawn(parent, CLIENT, str(listener.getsockname()[1]))
    conn, peer = listener.accept()
    try:
        inc = Incarnation(inc="r#1", run_id="r", role="worker", pid=proc.pid)
        assert peer[1] == int(port)
        assert sender(peer, [inc]) is inc
    finally:
        conn.close()
        proc.communicate("")
