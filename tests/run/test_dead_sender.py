"""A request whose sender died before the fake read it is that dead incarnation's, not its successor's.

A worker with a second thread (a LangGraph fan-out's other branch, a background send) writes a request and is
killed before the fake reads it. The fake still reads and applies it, possibly after the harness has started
the successor. Before, the registry gave it to the run's one live incarnation, the successor, which then
seemed to send the request twice (its own re-send followed, deduplicated): the keyed fan-in's unexplained
bounded_rework failure under load in session 17. Now the fake marks a request whose client had hung up when
it was read (`fake_services.server.hung_up`: its FIN is queued, as the kernel sends for a dead process's
socket), and the registry gives it to the incarnation that ended last.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from urllib.parse import urlsplit

from killpoint.env.launcher import Incarnation
from killpoint.fake_services import Services
from killpoint.fake_services.server import hung_up
from killpoint.run.registry import Registry
from tests.helpers.hooks import recording_hook

WRITE_AND_DIE = """
import os, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/emails HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
os._exit(0)
"""


def test_a_connection_whose_client_died_after_writing_has_hung_up() -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        subprocess.run([sys.executable, "-c", WRITE_AND_DIE, str(port)], timeout=60, check=True)  # dead now
        dead, _ = srv.accept()
        with socket.create_connection(("127.0.0.1", port)) as waiting:
            live, _ = srv.accept()
            waiting.sendall(b"POST /v1/emails HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            with dead, live:
                assert dead.recv(4096).endswith(b"{}") and live.recv(4096).endswith(b"{}")  # both requests read
                assert hung_up(dead)
                assert not hung_up(live)  # a client waiting for its answer
                live.settimeout(3600)  # a socket with a timeout: `recv` alone would wait for data
                answers: list[bool] = []
                check = threading.Thread(target=lambda: answers.append(hung_up(live)), daemon=True)
                check.start()
                check.join(timeout=30)
                assert answers == [False]  # at once, not after the socket's timeout
            assert not hung_up(dead)  # closed here: an error is not a hang-up


def test_the_fakes_tell_the_hook_which_requests_came_from_a_client_that_hung_up() -> None:
    hook, seen = recording_hook()
    body = json.dumps({"from": "billing@example.com", "to": ["ada@example.com"], "subject": "Invoice",
                       "html": "<p>1</p>"}).encode()
    with Services.start(hook=hook) as services:
        url = urlsplit(services.url("resend", "r-1") + "/emails")
        head = (f"POST {url.path} HTTP/1.1\r\nHost: {url.hostname}\r\nAuthorization: Bearer re_x\r\n"
                f"Idempotency-Key: k-{{}}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        for n, half_close in enumerate((False, True)):
            with socket.create_connection((url.hostname, url.port)) as client:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)  # the request and its FIN leave together
                client.sendall(head.replace("{}", str(n)).encode() + body)
                if half_close:
                    client.shutdown(socket.SHUT_WR)  # what a dead process's socket sends
                else:
                    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
                assert client.recv(4096).startswith(b"HTTP/1.1 200"), n
    received = {s["key"]: s["hung_up"] for s in seen if s["point"] == "effect.received"}
    assert received == {"k-0": False, "k-1": True}


def inc(n: int, ended_at: float | None) -> Incarnation:
    return Incarnation(inc=f"r#{n}", run_id="r", role="worker", pid=0, exited=ended_at is not None,
                       ended_at=ended_at)


def test_the_registry_gives_a_hung_up_request_to_the_incarnation_that_ended_last() -> None:
    registry = Registry(["r"])
    first, killed, successor = inc(1, 1.0), inc(2, 2.0), inc(3, None)
    for i in (first, killed, successor):
        registry.register(i, lambda _inc: None)
    assert registry.sender("r", {"peer": ("127.0.0.1", 1), "hung_up": True}) is killed
    assert registry.sender("r", {"peer": ("127.0.0.1", 1), "hung_up": False}) is None  # the one live: the owner
    assert registry.owner("r") is successor


def test_a_hung_up_request_of_a_run_none_of_whose_workers_ended_stays_the_owners() -> None:
    """A live worker that gave up waiting (its own timeout) hung up too: with no ended incarnation there is
    nobody else to give it to."""
    registry = Registry(["r"])
    only = inc(1, None)
    registry.register(only, lambda _inc: None)
    assert registry.sender("r", {"peer": ("127.0.0.1", 1), "hung_up": True}) is None
    assert registry.owner("r") is only


def test_a_process_fault_on_a_dead_senders_request_is_missed_not_aimed_at_another() -> None:
    """A `stop` there would otherwise freeze nothing and start a second successor beside the first; a `kill`
    would signal a dead process. Missed, the request goes on (not decisive for a generated schedule)."""
    from types import SimpleNamespace

    from killpoint.events import FaultMissed
    from killpoint.fake_services.hooks import Decision as D
    from killpoint.faults.schedule import Fault
    from killpoint.run.history import History
    from killpoint.run.nemesis import Nemesis

    history = History()
    target = SimpleNamespace(run_id="r", history=history,
                             spawn_successor=lambda: (_ for _ in ()).throw(AssertionError("no successor")))
    nemesis = Nemesis(target)  # type: ignore[arg-type]
    for action in ("kill", "term", "stop", "clock+366d"):
        reaction = nemesis.apply(Fault("email", "effect.received", action), inc(2, 2.0), service_point=True)
        assert reaction.release and reaction.decision == D.GO, action
    missed = [e for e in history.events() if isinstance(e, FaultMissed)]
    assert len(missed) == 4 and all(str(e.reason).startswith("no live incarnation: r#2") for e in missed), missed
