"""The real openai SDK against the fake OpenAI: deterministic chat completions with usage, streaming, the
Responses API, overload and error faults retried by the SDK, drops."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from killpoint.fake_services import Decision, Services
from killpoint.fake_services.model import answer

openai = pytest.importorskip("openai")

MODEL = "gpt-4o-mini"
HELLO = [{"role": "system", "content": "You approve invoices."},
         {"role": "user", "content": "Invoice inv-1 for 12.50 USD: approve?"}]


def sdk(svc: Services, run: str = "r-1", max_retries: int = 2) -> Any:
    return openai.OpenAI(api_key="sk-killpoint", base_url=svc.url("openai", run) + "/v1", max_retries=max_retries)


def chat(client: Any, messages: list[dict[str, Any]] = HELLO, **kw: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=messages, **kw)


def test_chat_completion_is_deterministic_with_usage(svc):
    first = chat(sdk(svc))
    expected = answer(MODEL, None, HELLO, None)
    [choice] = first.choices
    assert choice.message.role == "assistant" and choice.message.content == expected.text
    assert choice.finish_reason == "stop" and first.object == "chat.completion" and first.model == MODEL
    assert first.usage.prompt_tokens == expected.input_tokens > 0
    assert first.usage.completion_tokens == expected.output_tokens > 0
    assert first.usage.total_tokens == expected.input_tokens + expected.output_tokens
    assert first._request_id and first._request_id.startswith("req_")
    again = chat(sdk(svc, run="r-2"))  # another run, the same messages: the same answer
    assert (again.id, again.choices[0].message.content, again.usage) == (first.id, choice.message.content, first.usage)
    other = chat(sdk(svc), [{"role": "user", "content": "Invoice inv-2"}])
    assert other.choices[0].message.content != choice.message.content


def test_token_limit_cuts_the_answer(svc):
    cut = chat(sdk(svc), max_completion_tokens=2)
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 2


def test_every_request_is_recorded_like_the_anthropic_fakes(svc):
    response = chat(sdk(svc))
    [record] = svc.model_requests("r-1")
    assert (record["service"], record["api"], record["model"], record["messages"]) == ("openai", "chat.completions",
                                                                                        MODEL, HELLO)
    assert record["response_text"] == response.choices[0].message.content and record["outcome"] == "applied"
    assert record["usage"] == {"input_tokens": response.usage.prompt_tokens,
                               "output_tokens": response.usage.completion_tokens}
    assert [a["service"] for a in svc.attempts("r-1")] == ["openai"] and svc.effects("r-1") == []


def test_streaming_with_usage(svc):
    chunks = list(chat(sdk(svc), stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer(MODEL, None, HELLO, None).text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.completion_tokens == answer(MODEL, None, HELLO, None).output_tokens
    assert svc.model_requests("r-1")[0]["stream"] is True


def test_responses_api(svc):
    client = sdk(svc)
    response = client.responses.create(model=MODEL, input="Invoice inv-1: approve?", instructions="Be terse.")
    expected = answer(MODEL, "Be terse.", [{"role": "user", "content": "Invoice inv-1: approve?"}], None)
    assert response.output_text == expected.text and response.status == "completed"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (expected.input_tokens,
                                                                            expected.output_tokens)
    record = svc.model_requests("r-1")[0]
    assert record["api"] == "responses" and record["system"] == "Be terse."
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="x", stream=True)


@pytest.mark.parametrize("overloads", [1, 2])
def test_sdk_retries_429_overloads_then_succeeds(svc, overloads):
    svc.set_faults({"openai": {"overload_next": overloads}})
    started = time.perf_counter()
    response = chat(sdk(svc, max_retries=overloads))
    assert time.perf_counter() - started < 2  # retry-after-ms keeps the SDK's backoff short
    assert response.choices[0].message.content.startswith("answer ")
    records = svc.model_requests("r-1")
    assert [r["status"] for r in records] == [429] * overloads + [200]
    assert [r["retry_count"] for r in records] == list(range(overloads + 1))


def test_overload_and_error_beyond_the_retries_raise_the_sdks_types(svc):
    svc.set_faults({"openai": {"overload_next": 1}})
    with pytest.raises(openai.RateLimitError) as caught:
        chat(sdk(svc, max_retries=0))
    assert caught.value.status_code == 429 and caught.value.code == "rate_limit_exceeded"
    svc.set_hook(lambda point, info: Decision.ERROR)
    with pytest.raises(openai.InternalServerError):
        chat(sdk(svc, max_retries=0))
    svc.set_hook(None)
    svc.set_faults({"openai": {"error_next": 1}})
    assert chat(sdk(svc, max_retries=1)).choices[0].message.content  # a 500 is retried too
    assert [r["status"] for r in svc.model_requests("r-1")] == [429, 500, 500, 200]


def test_drop_is_a_connection_error_and_retried(svc):
    svc.set_faults({"openai": {"drop_next": 1}})
    with pytest.raises(openai.APIConnectionError):
        chat(sdk(svc, max_retries=0))
    svc.set_faults({"openai": {"drop_next": 1}})
    assert chat(sdk(svc, max_retries=1)).choices[0].message.content
    assert [r["outcome"] for r in svc.model_requests("r-1")] == ["dropped", "dropped", "applied"]


def test_hook_holds_openai_requests_at_model_request(svc):
    seen: list[dict[str, Any]] = []
    svc.set_hook(lambda point, info: seen.append({"point": point, **info}))
    chat(sdk(svc))
    [info] = seen
    assert (info["point"], info["service"], info["model"], info["retry_count"]) == ("model.request", "openai", MODEL, 0)


def test_base_url_from_the_environment(svc, monkeypatch):
    env = svc.env("r-env")
    monkeypatch.setenv("OPENAI_BASE_URL", env["OPENAI_BASE_URL"])
    monkeypatch.setenv("OPENAI_API_KEY", env["OPENAI_API_KEY"])
    assert chat(openai.OpenAI(max_retries=0)).choices[0].message.content
    assert len(svc.model_requests("r-env")) == 1


def test_no_key_is_401_in_openais_shape(svc):
    body = json.dumps({"model": MODEL, "messages": HELLO}).encode()
    request = urllib.request.Request(svc.url("openai", "r-1") + "/v1/chat/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 401 and json.loads(caught.value.read())["error"]["code"] == "invalid_api_key"
