"""The real anthropic SDK against the fake model: answers, usage, recording, retries on faults."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import httpx2
import pytest

from killpoint.fake_services import Decision, Services
from killpoint.fake_services.model import answer

MODEL = "claude-sonnet-4-6"
HELLO = [{"role": "user", "content": "Invoice inv-1 for 12.50 USD: approve?"}]


def sdk(svc: Services, run: str = "r-1", max_retries: int = 2) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=svc.url("model", run), api_key="test-key", max_retries=max_retries)


def ask(client: anthropic.Anthropic, messages: list[dict[str, Any]] = HELLO, **kw: Any) -> Any:
    return client.messages.create(model=MODEL, max_tokens=kw.pop("max_tokens", 256), messages=messages, **kw)


def test_sdk_gets_a_well_formed_deterministic_answer(svc):
    client = sdk(svc)
    first = ask(client)
    assert first.type == "message" and first.role == "assistant" and first.model == MODEL
    assert first.stop_reason == "end_turn" and first.content[0].type == "text"
    assert first.content[0].text.startswith("answer ") and "verdict=" in first.content[0].text
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    assert first._request_id and first._request_id.startswith("req_")
    again = ask(sdk(svc, run="r-2"))  # another run, the same messages: the same answer
    assert (again.id, again.content[0].text, again.usage) == (first.id, first.content[0].text, first.usage)
    other = ask(client, [{"role": "user", "content": "Invoice inv-2"}])
    assert other.content[0].text != first.content[0].text
    with_system = ask(client, system="You are terse.")
    assert with_system.content[0].text != first.content[0].text


def test_answer_is_a_pure_function_of_the_request():
    one = answer(MODEL, None, HELLO, 256)
    assert one == answer(MODEL, None, [dict(m) for m in HELLO], 256)
    assert one != answer("claude-haiku-4-5", None, HELLO, 256)
    cut = answer(MODEL, None, HELLO, 2)
    assert cut.stop_reason == "max_tokens" and cut.output_tokens == 2 and one.text.startswith(cut.text)


def test_every_request_is_recorded_with_its_messages(svc):
    client = sdk(svc)
    window = HELLO + [{"role": "assistant", "content": "answer x"}, {"role": "user", "content": "go on"}]
    ask(client)
    response = ask(client, window, system="sys")
    records = svc.model_requests("r-1")
    assert [r["messages"] for r in records] == [HELLO, window]
    last = records[-1]
    assert last["system"] == "sys" and last["model"] == MODEL and last["max_tokens"] == 256
    assert last["response_text"] == response.content[0].text and last["outcome"] == "applied"
    assert last["usage"] == {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens}
    assert [a["service"] for a in svc.attempts("r-1")] == ["model", "model"]
    assert svc.effects("r-1") == []  # a model call is not an external effect
    assert svc.model_requests("r-2") == []


@pytest.mark.parametrize("overloads", [1, 3])
def test_sdk_retries_overloads_then_succeeds(svc, overloads):
    svc.set_faults({"model": {"overload_next": overloads}})
    started = time.perf_counter()
    response = ask(sdk(svc, max_retries=overloads))
    assert time.perf_counter() - started < 2  # the fake's retry-after-ms keeps the SDK's backoff short
    assert response.content[0].text.startswith("answer ")
    records = svc.model_requests("r-1")
    assert [r["status"] for r in records] == [529] * overloads + [200]
    assert [r["retry_count"] for r in records] == list(range(overloads + 1))
    assert [a["outcome"] for a in svc.attempts("r-1")] == ["injected-error"] * overloads + ["applied"]


def test_overloads_beyond_max_retries_raise(svc):
    svc.set_faults({"model": {"overload_next": 3}})
    with pytest.raises(anthropic.OverloadedError) as caught:
        ask(sdk(svc, max_retries=2))
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert len(svc.model_requests("r-1")) == 3 and svc.faults()["model"]["overload_next"] == 0


def test_internal_error_from_the_hook_is_retried(svc):
    calls: list[dict[str, Any]] = []

    def hook(point: str, info: dict[str, Any]) -> Decision:
        calls.append(info)
        return Decision.ERROR if len(calls) == 1 else Decision.GO

    svc.set_hook(hook)
    assert ask(sdk(svc, max_retries=1)).content[0].text.startswith("answer ")
    assert [r["status"] for r in svc.model_requests("r-1")] == [500, 200]
    info = calls[0]
    assert info["service"] == "model" and info["run_id"] == "r-1" and info["model"] == MODEL
    assert info["headers"]["authorization"] == "Bearer test-key"  # what the SDK sends
    assert info["path"] == "/runs/r-1/v1/messages" and calls[1]["retry_count"] == 1


def test_no_retries_when_max_retries_is_zero(svc):
    svc.set_hook(lambda point, info: Decision.ERROR)
    with pytest.raises(anthropic.InternalServerError):
        ask(sdk(svc, max_retries=0))
    assert len(svc.model_requests("r-1")) == 1


def test_dropped_connection_is_retried_by_the_sdk(svc):
    svc.set_faults({"model": {"drop_next": 1}})
    assert ask(sdk(svc, max_retries=1)).content[0].text.startswith("answer ")
    assert [r["outcome"] for r in svc.model_requests("r-1")] == ["dropped", "applied"]


def test_latency(svc):
    svc.set_hook(lambda point, info: Decision.slow(200))
    started = time.perf_counter()
    ask(sdk(svc))
    assert time.perf_counter() - started >= 0.2


def test_streaming(svc):
    client = sdk(svc)
    with client.messages.stream(model=MODEL, max_tokens=256, messages=HELLO) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    plain = ask(client)
    assert text == final.content[0].text == plain.content[0].text
    assert final.usage.output_tokens == plain.usage.output_tokens and final.stop_reason == "end_turn"
    assert [r["stream"] for r in svc.model_requests("r-1")] == [True, False]


def test_max_tokens_cuts_the_answer(svc):
    response = ask(sdk(svc), max_tokens=3)
    assert response.stop_reason == "max_tokens" and response.usage.output_tokens == 3


def test_count_tokens(svc):
    counted = sdk(svc).messages.count_tokens(model=MODEL, messages=HELLO)
    assert counted.input_tokens == ask(sdk(svc)).usage.input_tokens


def test_bad_requests(svc):
    with pytest.raises(anthropic.BadRequestError):
        sdk(svc).messages.create(model=MODEL, max_tokens=10, messages=[])
    with httpx2.Client() as raw:
        unauthenticated = raw.post(svc.url("model", "r-1") + "/v1/messages",
                                   json={"model": MODEL, "max_tokens": 5, "messages": HELLO})
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"]["type"] == "authentication_error"
    assert [a["outcome"] for a in svc.attempts("r-1")] == ["rejected", "rejected"]
