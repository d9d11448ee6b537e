"""The effect fakes (mailer, ledger, webhook): idempotency, recording, hooks, faults, admin, speed."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import Any

import httpx2
import pytest

from killpoint.fake_services import AdminClient, Decision, Services

EMAIL = {"to": "ana@example.com", "template": "invoice", "data": {"invoice": "inv-1"}}
CHARGE = {"account": "acct_1", "amount_cents": 1250, "currency": "usd"}


def post(c: httpx2.Client, svc: Services, service: str, run: str, body: Any, key: str | None = None) -> httpx2.Response:
    path = {"mailer": "/v1/emails", "ledger": "/v1/charges", "webhook": "/v1/webhooks"}[service]
    headers = {"Idempotency-Key": key} if key is not None else {}
    return c.post(svc.url(service, run) + path, json=body, headers=headers)


def post_retrying(c: httpx2.Client, svc: Services, service: str, run: str, body: Any, key: str,
                  attempts: int = 4) -> tuple[httpx2.Response, list[Exception]]:
    """What a careful client does: retry transport errors and 5xx with the same key."""
    errors: list[Exception] = []
    for _ in range(attempts):
        try:
            response = post(c, svc, service, run, body, key)
        except httpx2.TransportError as exc:
            errors.append(exc)
            continue
        if response.status_code < 500:
            return response, errors
    raise AssertionError(f"no answer after {attempts} attempts: {errors}")


def outcomes(svc: Services, run: str) -> list[str]:
    return [a["outcome"] for a in svc.attempts(run)]


# idempotency ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("service", "body"), [("mailer", EMAIL), ("ledger", CHARGE)])
def test_same_key_twice_is_one_effect_and_two_attempts(svc, client, service, body):
    first = post(client, svc, service, "r-1", body, key="r-1:step")
    second = post(client, svc, service, "r-1", body, key="r-1:step")
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert "idempotent-replayed" not in first.headers
    assert second.headers["idempotent-replayed"] == "true"
    assert outcomes(svc, "r-1") == ["applied", "deduplicated"]
    effects = svc.effects("r-1")
    assert len(effects) == 1
    assert effects[0]["payload"] == body and effects[0]["key"] == "r-1:step"
    assert effects[0]["id"] == first.json()["id"]
    attempts = svc.attempts("r-1")
    assert {a["payload_digest"] for a in attempts} == {effects[0]["payload_digest"]}
    assert effects[0]["attempt"] == attempts[0]["order"]
    assert attempts[0]["order"] < effects[0]["order"] < attempts[1]["order"]


@pytest.mark.parametrize(("service", "body", "changed"), [
    ("mailer", EMAIL, {**EMAIL, "to": "bob@example.com"}),
    ("ledger", CHARGE, {**CHARGE, "amount_cents": 9999}),
])
def test_same_key_other_payload_is_rejected_422(svc, client, service, body, changed):
    assert post(client, svc, service, "r-1", body, key="k").status_code == 200
    refused = post(client, svc, service, "r-1", changed, key="k")
    assert refused.status_code == 422
    assert refused.json()["error"]["type"] == "idempotency_error"
    assert outcomes(svc, "r-1") == ["applied", "rejected"]
    assert [e["payload"] for e in svc.effects("r-1")] == [body]


def test_ledger_response_and_deterministic_ids(svc, client):
    charge = post(client, svc, "ledger", "r-1", CHARGE, key="r-1:charge").json()
    assert charge["status"] == "succeeded" and charge["id"].startswith("ch_")
    assert charge["amount_cents"] == 1250 and charge["currency"] == "usd" and charge["account"] == "acct_1"
    email = post(client, svc, "mailer", "r-1", EMAIL, key="r-1:email").json()
    assert email["status"] == "sent" and email["id"].startswith("em_")
    svc.reset()
    assert post(client, svc, "ledger", "r-1", CHARGE, key="r-1:charge").json()["id"] == charge["id"]
    assert post(client, svc, "ledger", "r-2", CHARGE, key="r-1:charge").json()["id"] != charge["id"]


def test_webhook_has_no_idempotency(svc, client):
    for _ in range(2):
        response = post(client, svc, "webhook", "r-1", {"event": "paid"}, key="same")
        assert response.status_code == 200 and response.json() == {"ok": True}
    assert outcomes(svc, "r-1") == ["applied", "applied"]
    effects = svc.effects("r-1")
    assert len(effects) == 2 and {e["service"] for e in effects} == {"webhook"}
    assert all(a["key"] == "same" for a in svc.attempts("r-1"))  # recorded, not honoured


def test_keys_are_scoped_per_run_and_runs_are_attributed_by_prefix(svc, client):
    post(client, svc, "ledger", "r-a", CHARGE, key="k")
    post(client, svc, "ledger", "r-b", CHARGE, key="k")
    client.post(svc.base_url("ledger") + "/v1/charges", json=CHARGE, headers={"Idempotency-Key": "k"})
    assert [len(svc.effects(r)) for r in ("r-a", "r-b", "default")] == [1, 1, 1]
    assert len(svc.effects()) == 3
    odd = "run/with space"
    assert post(client, svc, "mailer", odd, EMAIL, key="k").status_code == 200
    assert svc.attempts(odd)[0]["run_id"] == odd


def test_concurrent_retries_with_one_key_apply_once(svc):
    barrier = threading.Barrier(16)
    statuses: list[int] = []

    def send() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", svc.ports["ledger"], timeout=5)
        conn.connect()
        barrier.wait()
        conn.request("POST", "/runs/r-1/v1/charges", json.dumps(CHARGE), {"Idempotency-Key": "k"})
        statuses.append(conn.getresponse().status)
        conn.close()

    threads = [threading.Thread(target=send) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 16
    assert len(svc.effects("r-1")) == 1
    assert sorted(outcomes(svc, "r-1")) == ["applied"] + ["deduplicated"] * 15


@pytest.mark.parametrize(("body", "fragment"), [
    ({"template": "t"}, "'to'"),
    ({"to": "a@b", "template": "t", "data": [1]}, "'data'"),
    ([1, 2], "JSON object"),
])
def test_invalid_email_is_rejected_400(svc, client, body, fragment):
    response = post(client, svc, "mailer", "r-1", body, key="k")
    assert response.status_code == 400 and fragment in response.json()["error"]["message"]
    assert outcomes(svc, "r-1") == ["rejected"] and svc.effects("r-1") == []


@pytest.mark.parametrize("body", [
    {"account": "a", "currency": "usd"},
    {"account": "a", "amount_cents": -5, "currency": "usd"},
    {"account": "a", "amount_cents": 1.5, "currency": "usd"},
    {"account": "a", "amount_cents": 5, "currency": "dollars"},
])
def test_invalid_charge_is_rejected_400(svc, client, body):
    assert post(client, svc, "ledger", "r-1", body, key="k").status_code == 400
    assert outcomes(svc, "r-1") == ["rejected"]


def test_body_that_is_not_json_is_rejected(svc, client):
    response = client.post(svc.url("ledger", "r-1") + "/v1/charges", content=b"{nope", headers={"Idempotency-Key": "k"})
    assert response.status_code == 400 and outcomes(svc, "r-1") == ["rejected"]


def test_chunked_body_is_read(svc, client):
    chunks = iter([json.dumps(CHARGE)[:10].encode(), json.dumps(CHARGE)[10:].encode()])
    response = client.post(svc.url("ledger", "r-1") + "/v1/charges", content=chunks, headers={"Idempotency-Key": "k"})
    assert response.status_code == 200 and svc.effects("r-1")[0]["payload"] == CHARGE
    assert post(client, svc, "ledger", "r-1", CHARGE, key="k").status_code == 200  # the connection is still sane


def test_unknown_route_and_method(svc, client):
    assert client.post(svc.url("ledger", "r-1") + "/v1/refunds", json={}).status_code == 404
    assert client.get(svc.url("ledger", "r-1") + "/v1/charges").status_code == 405
    assert svc.attempts() == []


# faults and hooks ----------------------------------------------------------------------------


def test_drop_after_applying_makes_the_client_retry_and_the_effect_stays_single(svc, client):
    seen: list[str] = []

    def hook(point: str, info: dict[str, Any]) -> Decision:
        seen.append(point)
        return Decision.DROP if point == "effect.applied" and len(seen) == 2 else Decision.GO

    svc.set_hook(hook)
    response, errors = post_retrying(client, svc, "ledger", "r-1", CHARGE, key="r-1:charge")
    assert response.status_code == 200 and response.headers["idempotent-replayed"] == "true"
    assert len(errors) == 1 and isinstance(errors[0], (httpx2.ReadError, httpx2.RemoteProtocolError))
    assert outcomes(svc, "r-1") == ["dropped", "deduplicated"]
    assert len(svc.effects("r-1")) == 1
    assert seen == ["effect.received", "effect.applied", "effect.received"]
    assert svc.attempts("r-1")[0]["status"] is None


def test_drop_resets_the_connection(svc):
    svc.set_faults({"mailer": {"drop_next": 1}})
    sock = socket.create_connection(("127.0.0.1", svc.ports["mailer"]))
    body = json.dumps(EMAIL).encode()
    sock.sendall(b"POST /runs/r-1/v1/emails HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    with pytest.raises(ConnectionResetError):
        assert sock.recv(100) == b""  # a FIN would give b""; a reset raises
    sock.close()
    assert outcomes(svc, "r-1") == ["dropped"] and len(svc.effects("r-1")) == 1


def test_static_drop_then_retry_with_same_key(svc, client):
    svc.set_faults({"mailer": {"drop_next": 1}})
    response, errors = post_retrying(client, svc, "mailer", "r-1", EMAIL, key="r-1:email")
    assert response.status_code == 200 and len(errors) == 1
    assert outcomes(svc, "r-1") == ["dropped", "deduplicated"] and len(svc.effects("r-1")) == 1
    assert svc.faults() == {"mailer": {"drop_next": 0}}


def test_error_before_applying_applies_nothing(svc, client):
    svc.set_faults({"ledger": {"error_next": 2}})
    assert post(client, svc, "ledger", "r-1", CHARGE, key="k").status_code == 503
    response, _ = post_retrying(client, svc, "ledger", "r-1", CHARGE, key="k")
    assert response.status_code == 200 and "idempotent-replayed" not in response.headers
    assert outcomes(svc, "r-1") == ["injected-error", "injected-error", "applied"]
    assert len(svc.effects("r-1")) == 1


def test_hook_error_after_applying_keeps_the_effect(svc, client):
    svc.set_hook(lambda point, info: Decision.ERROR if point == "effect.applied" else None)
    assert post(client, svc, "ledger", "r-1", CHARGE, key="k").status_code == 500
    assert outcomes(svc, "r-1") == ["injected-error"] and len(svc.effects("r-1")) == 1


def test_hook_drop_at_received_applies_nothing(svc, client):
    svc.set_hook(lambda point, info: Decision.DROP if point == "effect.received" else None)
    with pytest.raises(httpx2.TransportError):
        post(client, svc, "mailer", "r-1", EMAIL, key="k")
    assert outcomes(svc, "r-1") == ["dropped"] and svc.effects("r-1") == []


def test_hook_gets_points_and_info(svc, client):
    calls: list[tuple[str, dict[str, Any]]] = []
    svc.set_hook(lambda point, info: calls.append((point, info)))
    post(client, svc, "ledger", "r-1", CHARGE, key="r-1:charge")
    post(client, svc, "ledger", "r-1", CHARGE, key="r-1:charge")
    assert [p for p, _ in calls] == ["effect.received", "effect.applied", "effect.received"]
    info = calls[0][1]
    assert info["service"] == "ledger" and info["run_id"] == "r-1" and info["key"] == "r-1:charge"
    assert info["path"] == "/runs/r-1/v1/charges" and info["headers"]["idempotency-key"] == "r-1:charge"
    assert info["payload_digest"] == svc.attempts("r-1")[0]["payload_digest"]
    assert info["order"] == 1 and calls[1][1]["effect_id"].startswith("ch_")


def holding_hook(svc: Services, at: str) -> tuple[threading.Event, threading.Event]:
    """Install a hook that holds requests at ``at`` (a barrier); return (held, release)."""
    held, release = threading.Event(), threading.Event()

    def hook(point: str, info: dict[str, Any]) -> Decision:
        if point == at:
            held.set()
            release.wait(5)
        return Decision.GO

    svc.set_hook(hook)
    return held, release


def test_hook_holds_the_request_until_released(svc, client):
    held, release = holding_hook(svc, "effect.received")
    result: list[int] = []
    sender = threading.Thread(target=lambda: result.append(post(client, svc, "mailer", "r-1", EMAIL, "k").status_code))
    sender.start()
    assert held.wait(5)
    time.sleep(0.05)
    assert outcomes(svc, "r-1") == ["pending"] and svc.effects("r-1") == [] and result == []
    release.set()
    sender.join(5)
    assert result == [200] and outcomes(svc, "r-1") == ["applied"]


def test_client_gone_while_held_is_quiet(svc, capfd):
    held, release = holding_hook(svc, "effect.applied")
    sock = socket.create_connection(("127.0.0.1", svc.ports["ledger"]))
    body = json.dumps(CHARGE).encode()
    sock.sendall(b"POST /runs/r-1/v1/charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    assert held.wait(5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()  # the worker was killed while the service held its request
    release.set()
    deadline = time.monotonic() + 30  # the answer's failed write is marked after the outcome: wait for the mark
    while not svc.attempts("r-1")[0].get("client_gone") and time.monotonic() < deadline:
        time.sleep(0.01)
    attempt = svc.attempts("r-1")[0]
    assert attempt["outcome"] == "applied" and attempt.get("client_gone") is True
    assert len(svc.effects("r-1")) == 1
    assert "Traceback" not in capfd.readouterr().err


def test_slow_adds_latency(svc, client):
    svc.set_hook(lambda point, info: Decision.slow(150) if point == "effect.received" else None)
    started = time.perf_counter()
    assert post(client, svc, "webhook", "r-1", {}).status_code == 200
    assert time.perf_counter() - started >= 0.15
    svc.set_hook(None)
    svc.set_faults({"webhook": {"delay_ms": 100}})
    started = time.perf_counter()
    post(client, svc, "webhook", "r-1", {})
    assert time.perf_counter() - started >= 0.1


def test_hook_that_raises_is_answered_500_and_recorded(svc, client, capfd):
    def hook(point: str, info: dict[str, Any]) -> Decision:
        raise RuntimeError("harness bug")

    svc.set_hook(hook)
    response = post(client, svc, "ledger", "r-1", CHARGE, key="k")
    assert response.status_code == 500 and "harness bug" in response.json()["error"]["message"]
    assert outcomes(svc, "r-1") == ["internal-error"] and svc.effects("r-1") == []
    assert "harness bug" in capfd.readouterr().err


def test_decision_validates():
    with pytest.raises(ValueError):
        Decision("explode")
    with pytest.raises(ValueError):
        Decision("slow", -1)
    assert Decision.slow(5) == Decision("slow", 5) and Decision.GO.action == "go"


@pytest.mark.parametrize("faults", [
    {"printer": {"error_next": 1}},
    {"ledger": {"overload_next": 1}},
    {"ledger": {"explode": 1}},
    {"ledger": {"error_next": -1}},
    {"ledger": {"error_next": True}},
    {"ledger": 3},
])
def test_bad_faults_are_refused(svc, faults):
    with pytest.raises(ValueError):
        svc.set_faults(faults)
    assert svc.faults() == {}


# admin -----------------------------------------------------------------------------------------


def test_admin_http_and_python(svc, client):
    admin = AdminClient(svc.base_url("ledger"))
    assert admin.health() == {"ok": True, "service": "ledger"}
    post(client, svc, "ledger", "r-1", CHARGE, key="k")
    post(client, svc, "mailer", "r-2", EMAIL, key="k")
    assert admin.attempts("r-1") == svc.attempts("r-1")
    assert admin.effects() == svc.effects() and len(admin.effects()) == 2
    assert admin.model_requests() == []
    assert admin.set_faults({"ledger": {"error_next": 1}}) == {"ledger": {"error_next": 1}}
    assert svc.faults() == {"ledger": {"error_next": 1}}
    with pytest.raises(RuntimeError, match="unknown service"):
        admin.set_faults({"printer": {}})
    admin.reset("r-1")
    assert svc.attempts("r-1") == [] and len(svc.attempts("r-2")) == 1
    assert svc.faults() == {"ledger": {"error_next": 1}}
    admin.reset()
    assert svc.attempts() == [] and svc.faults() == {}
    post(client, svc, "ledger", "r-1", CHARGE, key="k")
    assert svc.attempts()[0]["order"] == 1  # the counter starts again


def test_reset_one_run_forgets_its_keys(svc, client):
    post(client, svc, "ledger", "r-1", CHARGE, key="k")
    post(client, svc, "ledger", "r-2", CHARGE, key="k")
    svc.reset("r-1")
    assert post(client, svc, "ledger", "r-1", CHARGE, key="k").headers.get("idempotent-replayed") is None
    assert post(client, svc, "ledger", "r-2", CHARGE, key="k").headers["idempotent-replayed"] == "true"


def test_records_are_copies(svc, client):
    post(client, svc, "mailer", "r-1", EMAIL, key="k")
    svc.effects("r-1")[0]["payload"]["to"] = "mallory@example.com"
    svc.attempts("r-1")[0]["outcome"] = "forged"
    assert svc.effects("r-1")[0]["payload"] == EMAIL and outcomes(svc, "r-1") == ["applied"]


def test_env_names_the_run_urls(svc):
    env = svc.env("r-9")
    assert env["MAILER_URL"] == svc.url("mailer", "r-9") and env["MAILER_URL"].endswith("/runs/r-9")
    assert env["WEBHOOK_URL"].startswith(svc.base_url("mailer"))
    assert env["ANTHROPIC_BASE_URL"] == svc.url("model", "r-9") and env["ANTHROPIC_API_KEY"]
    with pytest.raises(ValueError):
        svc.url("printer", "r-9")


# speed and lifecycle ---------------------------------------------------------------------------


def test_keep_alive_and_no_nagle_delay(svc):
    conn = http.client.HTTPConnection("127.0.0.1", svc.ports["mailer"], timeout=5)
    body = json.dumps({"n": 1})
    conn.request("POST", "/runs/r-1/v1/webhooks", body)  # warm up, and open the connection
    conn.getresponse().read()
    sock = conn.sock
    n = 200
    started = time.perf_counter()
    for _ in range(n):
        conn.request("POST", "/runs/r-1/v1/webhooks", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200 and response.version == 11
    mean_ms = (time.perf_counter() - started) / n * 1000
    assert conn.sock is sock  # one connection for all: keep-alive
    conn.close()
    assert mean_ms < 10, f"mean round trip {mean_ms:.2f} ms: Nagle or a slow path is back"


def test_stop_closes_everything():
    others = set(threading.enumerate())  # another test's fakes (still stopping) are not this one's
    services = Services.start()
    port = services.ports["ledger"]
    with httpx2.Client(timeout=5) as c:
        post(c, services, "ledger", "r-1", CHARGE, key="k")  # leaves a keep-alive connection open
        mine = [t for t in threading.enumerate() if t not in others and t.name.startswith("fake-")]
        assert any(t.name.startswith("fake-ledger") for t in mine)
        services.stop()
        assert not [t.name for t in mine if t.is_alive()]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1)


def test_context_manager_stops():
    with Services.start() as services:
        port = services.ports["model"]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
