"""A unit test of a model client (the anthropic SDK) with respx, answering with the fake's own replies.

The SDK is built on httpx2; respx patches ``httpx``. respx sees the SDK's requests only when ``httpx``
*is* ``httpx2``, i.e. when ``httpx2.alias_httpx()`` ran before anything imported ``httpx`` or ``respx``.
Under pytest, respx's own plugin (entry point ``pytest11``) imports the real ``httpx`` first; in that
case this module drops the real ``httpx``/``httpcore``/``respx`` modules from ``sys.modules`` so that
the alias can take effect (run with ``-p no:respx`` and this is not needed). No conftest is involved.
"""

from __future__ import annotations

import sys

import httpx2

if sys.modules.get("httpx", httpx2) is not httpx2:
    for _name in [n for n in sys.modules if n.split(".")[0] in ("httpx", "httpcore", "respx")]:
        del sys.modules[_name]
httpx2.alias_httpx()

import json  # noqa: E402

import anthropic  # noqa: E402
import httpx  # noqa: E402
import pytest  # noqa: E402
import respx  # noqa: E402

from killpoint.fake_services.model import answer, message_body  # noqa: E402

BASE = "http://model.test/runs/r-1"
MODEL = "claude-haiku-4-5"


def fake_reply(request: httpx.Request) -> httpx.Response:
    """Answer as the fake model does, without a socket."""
    body = json.loads(request.content)
    ans = answer(body["model"], body.get("system"), body["messages"], body["max_tokens"])
    return httpx.Response(200, json=message_body(body["model"], ans), headers={"request-id": "req_respx"})


def client(max_retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=BASE, api_key="sk-test", max_retries=max_retries)


def test_the_alias_is_in_force():
    assert httpx is httpx2 and sys.modules["httpx"] is httpx2


def test_model_client_request_and_answer() -> None:
    messages = [{"role": "user", "content": "Invoice inv-1: approve?"}]
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        route = router.post("/v1/messages").mock(side_effect=fake_reply)
        response = client().messages.create(model=MODEL, max_tokens=64, messages=messages, system="terse")
    assert route.call_count == 1
    sent = route.calls.last.request
    assert sent.headers["authorization"] == "Bearer sk-test"  # the SDK sends the key as a Bearer header
    assert sent.headers["x-stainless-retry-count"] == "0" and "anthropic-version" in sent.headers
    assert json.loads(sent.content) == {"model": MODEL, "max_tokens": 64, "messages": messages, "system": "terse"}
    expected = answer(MODEL, "terse", messages, 64)
    assert response.content[0].text == expected.text and response.id == expected.message_id
    assert response.usage.input_tokens == expected.input_tokens and response._request_id == "req_respx"


@respx.mock
def test_model_client_retries_overloads_with_its_retry_headers() -> None:
    overloaded = httpx.Response(
        529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        headers={"retry-after-ms": "1"},
    )
    route = respx.post(f"{BASE}/v1/messages").mock(side_effect=[overloaded, overloaded, fake_reply])
    response = client(max_retries=2).messages.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert response.content[0].text.startswith("answer ")
    assert [c.request.headers["x-stainless-retry-count"] for c in route.calls] == ["0", "1", "2"]


@respx.mock
def test_model_client_gives_up_after_max_retries() -> None:
    respx.post(f"{BASE}/v1/messages").mock(return_value=httpx.Response(
        529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        headers={"retry-after-ms": "1"}))
    with pytest.raises(anthropic.OverloadedError):
        client(max_retries=1).messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert respx.calls.call_count == 2
