"""The real resend SDK against the fake Resend: POST /emails with Idempotency-Key, errors as the SDK's own
types, faults at the kill points."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from killpoint.fake_services import Decision, Services

resend = pytest.importorskip("resend")
from resend import exceptions  # noqa: E402

EMAIL = {"from": "Billing <billing@example.com>", "to": ["ada@example.com"], "subject": "Invoice inv-1",
         "html": "<p>Your invoice</p>"}


@pytest.fixture
def svc(monkeypatch: pytest.MonkeyPatch) -> Iterator[Services]:
    with Services.start() as services:
        monkeypatch.setattr(resend, "api_key", "re_killpoint")
        monkeypatch.setattr(resend, "api_url", services.url("resend", "r-1"))
        yield services


def send(key: str | None = "email-inv-1", **changes: Any) -> Any:
    return resend.Emails.send({**EMAIL, **changes}, {"idempotency_key": key} if key else None)


def outcomes(svc: Services, run: str = "r-1") -> list[str]:
    return [a["outcome"] for a in svc.attempts(run)]


def test_send_records_the_effect_and_get_reads_it(svc):
    sent = send()
    [effect] = svc.effects("r-1")
    assert sent["id"] == effect["id"] and len(sent["id"]) == 36  # a UUID, as Resend's
    assert effect["service"] == "resend" and effect["key"] == "email-inv-1" and effect["payload"] == EMAIL
    got = resend.Emails.get(sent["id"])
    assert (got["id"], got["to"], got["subject"], got["last_event"]) == (sent["id"], EMAIL["to"], EMAIL["subject"],
                                                                          "delivered")
    assert [a["path"] for a in svc.attempts("r-1")] == ["/emails"]  # a read is no attempt


def test_same_key_same_payload_returns_the_first_response(svc):
    first, second = send(), send()
    assert second["id"] == first["id"]
    assert outcomes(svc) == ["applied", "deduplicated"] and len(svc.effects("r-1")) == 1
    without_key = [send(key=None)["id"], send(key=None)["id"]]  # no key: every send is an email
    assert len(set(without_key)) == 2 and len(svc.effects("r-1")) == 3


def test_same_key_other_payload_is_the_idempotency_error(svc):
    send()
    with pytest.raises(exceptions.ResendError) as caught:
        send(subject="Another subject")
    assert (caught.value.code, caught.value.error_type) == (409, "invalid_idempotent_request")
    assert outcomes(svc) == ["applied", "rejected"] and len(svc.effects("r-1")) == 1


def test_injected_errors_raise_the_sdks_types(svc):
    svc.set_faults({"resend": {"error_next": 1}})
    with pytest.raises(exceptions.ResendError) as caught:
        send()
    assert caught.value.code == 503 and svc.effects("r-1") == []
    svc.set_hook(lambda point, info: Decision.ERROR if point == "effect.applied" else None)
    with pytest.raises(exceptions.ApplicationError):
        send()
    assert len(svc.effects("r-1")) == 1  # the effect stays
    svc.set_hook(None)
    assert send()["id"] == svc.effects("r-1")[0]["id"]
    assert outcomes(svc) == ["injected-error", "injected-error", "deduplicated"]


def test_drop_after_apply_sends_once_and_the_client_sees_a_connection_error(svc):
    svc.set_faults({"resend": {"drop_next": 1}})
    with pytest.raises(exceptions.ResendError) as caught:
        send()
    assert caught.value.error_type == "HttpClientError"  # how the SDK reports a reset connection
    assert outcomes(svc) == ["dropped"] and len(svc.effects("r-1")) == 1
    assert send()["id"] == svc.effects("r-1")[0]["id"]
    assert outcomes(svc) == ["dropped", "deduplicated"] and len(svc.effects("r-1")) == 1


def test_overload_is_a_rate_limit_error(svc):
    svc.set_faults({"resend": {"overload_next": 1}})
    with pytest.raises(exceptions.RateLimitError) as caught:
        send()
    assert caught.value.code == 429 and caught.value.headers.get("retry-after") == "1"
    assert svc.effects("r-1") == []


def test_hook_sees_resend_requests(svc):
    seen: list[tuple[str, str]] = []
    svc.set_hook(lambda point, info: seen.append((point, info["service"])))
    send()
    assert seen == [("effect.received", "resend"), ("effect.applied", "resend")]


def test_validation_errors(svc):
    with pytest.raises(exceptions.MissingRequiredFieldsError):
        resend.Emails.send({"from": EMAIL["from"], "subject": "x", "html": "x"})
    with pytest.raises(exceptions.ResendError) as caught:
        send(to="not-an-address")
    assert caught.value.code == 422
    assert outcomes(svc) == ["rejected", "rejected"] and svc.effects("r-1") == []


def test_missing_api_key_is_refused_in_resends_shape(svc):
    request = urllib.request.Request(svc.url("resend", "r-1") + "/emails", data=json.dumps(EMAIL).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 401
    assert json.loads(caught.value.read()) == {"statusCode": 401, "name": "missing_api_key",
                                               "message": "No API key provided: send the header Authorization: "
                                                          "Bearer <key>."}
