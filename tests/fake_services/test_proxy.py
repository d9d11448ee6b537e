"""The recording proxy (fake_services/proxy.py) in front of a real upstream: a sandbox SMS API on 127.0.0.1.

What the upstream saw is read from the upstream itself (``SmsApi.sent``), so each test checks the proxy's
records against the service's own account of what happened.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from killpoint.fake_services import Decision, Services
from killpoint.fake_services.proxy import env_var, parse_effect
from tests.fake_services.sms_upstream import SmsApi
from tests.fake_services.ticket_upstream import TicketApi

RUN = "r-1"


@pytest.fixture
def sms() -> Iterator[SmsApi]:
    with SmsApi() as api:
        yield api


@pytest.fixture
def svc(sms: SmsApi) -> Iterator[Services]:
    with Services.start(upstreams={"sms": sms.url}) as services:
        yield services


def call(svc: Services, method: str, path: str, body: Any = None, key: str | None = None,
         run: str = RUN) -> tuple[int, Any, dict[str, str]]:
    """One request through the proxy's run URL; (status, JSON body, headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", svc.ports["sms"], timeout=10)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    prefix = svc.url("sms", run).split(str(svc.ports["sms"]), 1)[1]
    try:
        conn.request(method, prefix + path, None if body is None else json.dumps(body), headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null"), {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def test_a_request_is_forwarded_recorded_and_answered_as_the_upstream_answered(svc, sms):
    status, body, headers = call(svc, "POST", "/v1/messages", {"to": "+15550001", "text": "paid"}, key="k-1")
    assert (status, body) == (201, {"id": "sms_000001", "to": "+15550001", "status": "queued"})
    assert headers["content-type"] == "application/json"
    assert sms.sent == [{"to": "+15550001", "text": "paid"}]
    [attempt] = svc.attempts(RUN)
    assert (attempt["service"], attempt["key"], attempt["outcome"], attempt["status"]) == ("sms", "k-1", "applied", 201)
    [effect] = svc.effects(RUN)
    assert effect["payload"] == {"method": "POST", "path": "/v1/messages", "body": {"to": "+15550001", "text": "paid"}}
    assert effect["id"] == "sms_000001" and effect["response"] == {"status": 201, "body": body}
    assert effect["payload_digest"] == attempt["payload_digest"]
    assert svc.env(RUN)["KILLPOINT_EFFECT_SMS_URL"] == svc.url("sms", RUN)


def test_a_retry_the_upstream_deduplicates_is_one_effect_and_without_a_key_two(svc, sms):
    first = call(svc, "POST", "/v1/messages", {"to": "+1", "text": "a"}, key="k")
    again = call(svc, "POST", "/v1/messages", {"to": "+1", "text": "a"}, key="k")
    assert first[:2] == again[:2] and again[2]["idempotent-replayed"] == "true"
    assert [a["outcome"] for a in svc.attempts(RUN)] == ["applied", "deduplicated"]
    assert len(svc.effects(RUN)) == 1 and len(sms.sent) == 1
    call(svc, "POST", "/v1/messages", {"to": "+2", "text": "b"})
    call(svc, "POST", "/v1/messages", {"to": "+2", "text": "b"})
    assert len(sms.sent) == 3
    keyless = [e for e in svc.effects(RUN) if e["key"] is None]
    assert len(keyless) == 2 and keyless[0]["payload_digest"] == keyless[1]["payload_digest"]


def test_an_equal_answer_without_an_id_proves_neither_a_replay_nor_a_second_effect(svc, sms):
    assert call(svc, "POST", "/v1/pings", {}, key="k")[:2] == call(svc, "POST", "/v1/pings", {}, key="k")[:2]
    assert sms.pings == 2  # this upstream ignored the key, but its answer cannot show it
    first, again = svc.attempts(RUN)
    assert (first["outcome"], again["outcome"]) == ("applied", "unproven") and len(svc.effects(RUN)) == 1
    assert "--effect sms=" in again["why"] and "id=PATH" in again["why"]
    call(svc, "POST", "/v1/pings", {})  # with no key, nothing was asked to be deduplicated: a second effect
    assert len(svc.effects(RUN)) == 2


@pytest.fixture
def tickets() -> Iterator[TicketApi]:
    with TicketApi() as api:
        yield api


def ticket_call(svc: Services, path: str, body: Any, key: str | None) -> tuple[int, Any, dict[str, str]]:
    """`call` through the `tickets` proxy."""
    conn = http.client.HTTPConnection("127.0.0.1", svc.ports["tickets"], timeout=10)
    prefix = svc.url("tickets", RUN).split(str(svc.ports["tickets"]), 1)[1]
    try:
        conn.request("POST", prefix + path, json.dumps(body),
                     {"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read()), dict(response.getheaders())
    finally:
        conn.close()


@pytest.mark.parametrize("spec, outcome", [("", "unproven"), (",id=ticket.id", "deduplicated")])
def test_a_nested_id_tells_a_replay_only_once_declared(tickets, spec, outcome):
    with Services.start(upstreams={"tickets": tickets.url + spec}) as svc:
        first = ticket_call(svc, "/v2/tickets", {"ticket": {"subject": "refund"}}, "k")
        again = ticket_call(svc, "/v2/tickets", {"ticket": {"subject": "refund"}}, "k")
        assert first[1] == again[1] == {"ticket": {"id": 1, "subject": "refund", "status": "new"}}
        assert len(tickets.tickets) == 1  # the upstream opened one ticket
        assert [a["outcome"] for a in svc.attempts(RUN)] == ["applied", outcome]
        [effect] = svc.effects(RUN)
        assert effect["id"] == ("1" if spec else effect["id"])
        ticket_call(svc, "/v2/tickets", {"ticket": {"subject": "refund"}}, None)  # a second ticket, no key
        assert len(tickets.tickets) == 2 and len(svc.effects(RUN)) == 2


def test_a_declared_id_that_differs_is_a_second_effect(tickets):
    """Twilio's `sid`: the same key answered with another object is proven a second effect."""
    with Services.start(upstreams={"tickets": tickets.url + ",id=sid"}) as svc:
        ticket_call(svc, "/2010-04-01/Messages", {"To": "+1", "Body": "a"}, "k")
        tickets.answers.clear()  # the service forgets the key: the repeat makes a second text
        ticket_call(svc, "/2010-04-01/Messages", {"To": "+1", "Body": "a"}, "k")
        assert len(tickets.texts) == 2
        assert [a["outcome"] for a in svc.attempts(RUN)] == ["applied", "applied"] and len(svc.effects(RUN)) == 2


def test_reads_are_forwarded_and_not_recorded(svc, sms):
    call(svc, "POST", "/v1/messages", {"to": "+1", "text": "a"})
    status, body, _ = call(svc, "GET", "/v1/messages")
    assert status == 200 and body == {"data": [{"to": "+1", "text": "a"}]}
    assert len(svc.attempts(RUN)) == 1


def test_an_upstream_refusal_is_passed_back_and_applies_nothing(svc, sms):
    status, body, _ = call(svc, "POST", "/v1/messages", {"text": "no recipient"})
    assert (status, body) == (400, {"error": "to is required"})
    assert [(a["outcome"], a["status"]) for a in svc.attempts(RUN)] == [("rejected", 400)]
    assert svc.effects(RUN) == [] and sms.sent == []


def test_held_points_error_before_forwarding_and_drop_after_the_upstream_applied(svc, sms):
    seen: list[tuple[str, dict]] = []

    def hook(point: str, info: dict) -> Decision:
        seen.append((point, info))
        if info["key"] == "err" and point == "effect.received":
            return Decision.ERROR
        if info["key"] == "drop" and point == "effect.applied":
            return Decision.DROP
        return Decision.GO

    svc.set_hook(hook)
    assert call(svc, "POST", "/v1/messages", {"to": "+1", "text": "a"}, key="err")[0] == 503
    assert sms.sent == [] and svc.effects(RUN) == []
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        call(svc, "POST", "/v1/messages", {"to": "+2", "text": "b"}, key="drop")
    assert sms.sent == [{"to": "+2", "text": "b"}]  # the upstream applied it; the client never heard
    [effect] = svc.effects(RUN)
    assert effect["key"] == "drop"
    assert [a["outcome"] for a in svc.attempts(RUN)] == ["injected-error", "dropped"]
    assert [p for p, _ in seen] == ["effect.received", "effect.received", "effect.applied"]
    assert {i["service"] for _, i in seen} == {"sms"} and seen[-1][1]["effect_id"] == effect["id"]
    # the client retries with its key: the upstream replays, the proxy sees a retry, not a second effect
    assert call(svc, "POST", "/v1/messages", {"to": "+2", "text": "b"}, key="drop")[0] == 201
    assert len(svc.effects(RUN)) == 1 and svc.attempts(RUN)[-1]["outcome"] == "deduplicated"


def test_a_request_is_held_at_effect_received_until_the_hook_lets_it_go(svc, sms):
    arrived, release = threading.Event(), threading.Event()

    def hook(point: str, info: dict) -> Decision:
        if point == "effect.received":
            arrived.set()
            assert release.wait(10)
        return Decision.GO

    svc.set_hook(hook)
    answer: list[int] = []
    thread = threading.Thread(target=lambda: answer.append(call(svc, "POST", "/v1/messages", {"to": "+1"})[0]))
    thread.start()
    assert arrived.wait(10)
    assert sms.sent == [] and svc.attempts(RUN)[0]["outcome"] == "pending"  # held: not forwarded yet
    release.set()
    thread.join(10)
    assert answer == [201] and len(sms.sent) == 1


def test_an_unreachable_upstream_is_a_502_and_no_effect():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Services.start(upstreams={"gone": f"http://127.0.0.1:{port}"}) as svc:
        conn = http.client.HTTPConnection("127.0.0.1", svc.ports["gone"], timeout=10)
        conn.request("POST", f"/runs/{RUN}/x", b"{}")
        response = conn.getresponse()
        body = json.loads(response.read())
        conn.close()
        assert response.status == 502 and "gone" in body["error"]["message"]
        assert [a["outcome"] for a in svc.attempts(RUN)] == ["upstream-error"] and svc.effects(RUN) == []


@pytest.mark.parametrize("text, problem", [
    ("sms", "not NAME=URL"), ("SMS=http://x", "lower-case"), ("stripe=http://x", "a fake's name"),
    ("sms=ftp://x", "not an http"), ("sms=http://x/?a=1", "query"), ("sms=http://x,sid", "only id=PATH"),
    ("sms=http://x,id=a..b", "dot-separated path"),
])
def test_bad_effects_are_refused_naming_the_problem(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_effect(text, ("stripe", "mailer"))


def test_a_declared_id_path_is_kept_in_the_spec_a_replay_line_repeats():
    up = parse_effect("tickets=http://127.0.0.1:9/api,id=ticket.id")
    assert (up.url, up.id_path, up.spec) == ("http://127.0.0.1:9/api", "ticket.id", "http://127.0.0.1:9/api,id=ticket.id")


def test_the_environment_variable_is_the_upper_cased_name():
    assert env_var("sms-eu") == "KILLPOINT_EFFECT_SMS_EU_URL"
