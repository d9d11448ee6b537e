"""``python -m killpoint.fake_services NAME --port N``: starts, answers, stops cleanly on SIGTERM, leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest

from killpoint.fake_services import AdminClient
from tests.helpers import REPO

ROOT = REPO
REQUESTS = {
    "mailer": ("/runs/r-1/v1/emails", {"to": "a@example.com", "template": "t"}, {"Idempotency-Key": "k"}),
    "ledger": ("/runs/r-1/v1/charges", {"account": "a", "amount_cents": 5, "currency": "usd"},
               {"Idempotency-Key": "k"}),
    "model": ("/runs/r-1/v1/messages", {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "x"}]},
              {"Authorization": "Bearer k"}),
}


def fake_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@contextmanager
def standalone(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen([sys.executable, "-m", "fake_services", *args], cwd=ROOT, env=fake_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        yield proc, line
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def post(url: str, body: object, headers: dict[str, str]) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, json.loads(response.read())


@pytest.mark.parametrize("service", ["mailer", "ledger", "model"])
def test_standalone_starts_answers_and_stops_on_sigterm(service):
    with standalone(service, "--port", "0") as (proc, line):
        prefix = f"fake {service} listening on http://127.0.0.1:"
        assert line.startswith(prefix), line
        base = line.removeprefix(f"fake {service} listening on ")
        path, body, headers = REQUESTS[service]
        status, answer = post(base + path, body, headers)
        assert status == 200
        admin = AdminClient(base)
        assert admin.health()["service"] == service
        assert [a["outcome"] for a in admin.attempts("r-1")] == ["applied"]
        if service == "mailer":
            assert post(base + "/runs/r-1/v1/webhooks", {"e": 1}, {})[0] == 200
            assert len(admin.effects("r-1")) == 2
        assert psutil.Process(proc.pid).is_running()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""
        assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE
    assert not [c for c in psutil.Process().children(recursive=True) if c.pid == proc.pid]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=1)


def test_sigint_with_an_open_keep_alive_connection_stops_too():
    with standalone("ledger") as (proc, line):
        base = line.rsplit(" ", 1)[1]
        host, port = base.removeprefix("http://").split(":")
        held_open = socket.create_connection((host, int(port)))
        held_open.sendall(b"GET /_admin/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200" in held_open.recv(1000)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == 0
        assert held_open.recv(1000) == b""  # the server closed it
        held_open.close()


def test_port_in_use_is_one_clear_line_and_exit_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "fake_services", "model", "--port", str(port)],
                                cwd=ROOT, env=fake_env(), capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(port) in lines[0] and "--port" in lines[0] and "in use" in lines[0]
    assert "Traceback" not in result.stderr


def test_unknown_service_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "fake_services", "printer"], cwd=ROOT, env=fake_env(),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "invalid choice" in result.stderr
