"""The API fakes (stripe, resend, openai) as parts of the fake services: routing by method and pattern,
static faults, the worker environment, and the standalone command."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.parse

import pytest

from killpoint.fake_services import AdminClient, Services


def call(svc: Services, service: str, method: str, path: str, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", svc.ports[service], timeout=5)
    try:
        conn.request(method, path, body, headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def test_routes_answer_by_method_and_pattern(svc):
    auth = {"Authorization": "Bearer sk_test_x", "Content-Type": "application/x-www-form-urlencoded"}
    status, charge = call(svc, "stripe", "POST", "/runs/r-1/v1/charges",
                          b"amount=300&currency=usd&source=tok_visa", {**auth, "Idempotency-Key": "k"})
    assert status == 200 and charge["object"] == "charge"
    status, got = call(svc, "stripe", "GET", f"/runs/r-1/v1/charges/{charge['id']}", headers=auth)
    assert status == 200 and got["id"] == charge["id"]
    assert call(svc, "stripe", "GET", f"/runs/r-2/v1/charges/{charge['id']}", headers=auth)[0] == 404  # per run
    status, body = call(svc, "mailer", "GET", "/runs/r-1/v1/emails")
    assert status == 405 and "POST" in body["error"]["message"]
    status, body = call(svc, "stripe", "POST", f"/runs/r-1/v1/charges/{charge['id']}", b"", auth)
    assert status == 404 and body["error"]["message"].startswith("Unrecognized request URL (POST: /v1/charges/ch_")
    assert call(svc, "stripe", "GET", "/runs/r-1/v1/charges/a/b", headers=auth)[0] == 404
    assert call(svc, "openai", "POST", "/runs/r-1/v1/embeddings", b"{}")[0] == 404


def test_run_ids_are_taken_from_the_prefix_for_every_api(svc):
    run = "run/with space"
    prefix = f"/runs/{urllib.parse.quote(run, safe='')}"
    status, _ = call(svc, "stripe", "POST", prefix + "/v1/charges", b"amount=1&currency=usd&source=tok_visa",
                     {"Authorization": "Bearer k", "Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and [e["run_id"] for e in svc.effects()] == [run]
    assert svc.url("stripe", run).endswith(prefix)


def test_stripe_without_a_key_is_401(svc):
    status, body = call(svc, "stripe", "POST", "/runs/r-1/v1/charges", b"amount=1&currency=usd&source=tok_visa")
    assert status == 401 and body["error"]["type"] == "invalid_request_error"
    assert [a["outcome"] for a in svc.attempts("r-1")] == ["rejected"]


def test_static_faults_for_the_api_fakes(svc):
    svc.set_faults({"stripe": {"overload_next": 1}, "resend": {"overload_next": 1, "drop_next": 1},
                    "openai": {"overload_next": 2, "retry_after_ms": 0}})
    assert svc.faults()["openai"] == {"overload_next": 2, "retry_after_ms": 0}
    for faults in ({"stripe": {"retry_after_ms": 5}}, {"resend": {"retry_after_ms": 5}},
                   {"webhook": {"overload_next": 1}}):
        with pytest.raises(ValueError, match="only"):
            svc.set_faults(faults)


def test_env_names_every_service(svc):
    env = svc.env("r-9", api_key="k")
    assert env["STRIPE_BASE_URL"] == svc.url("stripe", "r-9") and env["STRIPE_API_KEY"] == "k"
    assert env["RESEND_API_URL"] == env["RESEND_BASE_URL"] == svc.url("resend", "r-9") and env["RESEND_API_KEY"] == "k"
    assert env["OPENAI_BASE_URL"] == svc.url("openai", "r-9") + "/v1" and env["OPENAI_API_KEY"] == "k"
    assert {"MAILER_URL", "LEDGER_URL", "WEBHOOK_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"} <= set(env)


def test_records_of_all_services_share_one_arrival_order(svc):
    call(svc, "mailer", "POST", "/runs/r-1/v1/emails", json.dumps({"to": "a@x.dev", "template": "t"}).encode())
    call(svc, "resend", "POST", "/runs/r-1/emails",
         json.dumps({"from": "a@x.dev", "to": "b@x.dev", "subject": "s"}).encode(), {"Authorization": "Bearer k"})
    call(svc, "openai", "POST", "/runs/r-1/v1/chat/completions",
         json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode(),
         {"Authorization": "Bearer k"})
    attempts = svc.attempts("r-1")
    assert [a["service"] for a in attempts] == ["mailer", "resend", "openai"]
    orders = sorted([a["order"] for a in attempts] + [e["order"] for e in svc.effects("r-1")])
    assert orders == list(range(1, 6))  # one counter: three attempts and two effects
    assert AdminClient(svc.base_url("stripe")).attempts("r-1") == svc.attempts("r-1")


@pytest.mark.parametrize(("name", "path", "body", "headers"), [
    ("stripe", "/runs/r-1/v1/payment_intents", b"amount=5&currency=usd",
     {"Authorization": "Bearer k", "Content-Type": "application/x-www-form-urlencoded", "Idempotency-Key": "k"}),
    ("resend", "/runs/r-1/emails", json.dumps({"from": "a@x.dev", "to": "b@x.dev", "subject": "s"}).encode(),
     {"Authorization": "Bearer k", "Idempotency-Key": "k"}),
    ("openai", "/runs/r-1/v1/chat/completions",
     json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode(), {"Authorization": "Bearer k"}),
])
def test_standalone(name, path, body, headers):
    proc = subprocess.Popen([sys.executable, "-m", "killpoint.fake_services", name, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        assert line.startswith(f"fake {name} listening on http://127.0.0.1:"), line
        base = line.rsplit(" ", 1)[1]
        host, port = urllib.parse.urlsplit(base).hostname, urllib.parse.urlsplit(base).port
        conn = http.client.HTTPConnection(host, port, timeout=5)
        conn.request("POST", path, body, headers)
        response = conn.getresponse()
        assert response.status == 200, response.read()
        conn.close()
        admin = AdminClient(base)
        assert [a["service"] for a in admin.attempts("r-1")] == [name]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
