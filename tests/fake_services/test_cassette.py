"""Cassettes (issue 22, item 4): a recording session through the fakes asks a loopback stand-in for the real
Anthropic API (``anthropic_upstream.py``) once per request and writes its answers, never a key; a replay
answers them with the upstream gone; a request missing from a strict cassette is a 400 naming its digest,
journaled as ``cassette: missing``; the script's pinned answers come first, the default policy last."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from killpoint.fake_services import Services
from killpoint.fake_services.cassette import Cassette, CassetteError, from_environment
from tests.fake_services.anthropic_upstream import USAGE, AnthropicApi, anthropic_api
from tests.fake_services.test_model_script import anthropic_loop

SECRET = "sk-ant-real-secret-key"


def recorder(path: Path, upstream: AnthropicApi) -> Cassette:
    return Cassette(path, "record", {"model": upstream.url}, environ={"ANTHROPIC_API_KEY": SECRET})


def streamed(svc: Services, text: str) -> Any:
    client = anthropic.Anthropic(base_url=svc.url("model", "r-1"), api_key="k", max_retries=0)
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=64,
                                messages=[{"role": "user", "content": text}]) as stream:
        return stream.get_final_message()


def test_a_recorded_tool_loop_replays_with_the_upstream_gone_and_no_key_in_the_file(tmp_path: Path):
    path = tmp_path / "answers.jsonl"
    with anthropic_api() as upstream, Services.start(script=[], cassette=recorder(path, upstream)) as svc:
        use, final = anthropic_loop(svc)
        first = streamed(svc, "hello")
        again = anthropic_loop(svc)  # already recorded: the upstream is not asked again
    assert (use.id, use.name, use.input) == ("toolu_01REAL0001", "issue_refund", {"order_id": "A-17", "amount": 4200})
    assert final.content[0].text == "real answer 2" and first.content[0].text == "real answer 3"
    assert again[1].content[0].text == "real answer 2" and len(upstream.seen) == 3
    assert all(h["x-api-key"] == SECRET and "stream" not in b for h, b in upstream.seen)
    text = path.read_text()
    assert SECRET not in text and '"k"' not in text and "x-api-key" not in text.lower()
    assert [json.loads(line)["api"] for line in text.splitlines()] == ["messages"] * 3

    with Services.start(script=[], cassette=Cassette(path)) as svc:  # strict replay; nothing listens upstream
        use2, final2 = anthropic_loop(svc)
        first2 = streamed(svc, "hello")
        records = svc.model_requests("r-1")
    assert (use2.id, use2.input, final2.content[0].text, first2.content[0].text) == \
        (use.id, use.input, "real answer 2", "real answer 3")
    assert final2.usage.input_tokens == USAGE["input_tokens"] and final2.usage.output_tokens == USAGE["output_tokens"]
    assert [r["outcome"] for r in records] == ["applied"] * 3


def test_a_request_missing_from_a_strict_cassette_is_named_never_answered(tmp_path: Path):
    path = tmp_path / "answers.jsonl"
    with anthropic_api() as upstream, Services.start(script=[], cassette=recorder(path, upstream)) as svc:
        streamed(svc, "hello")
    with Services.start(script=[], cassette=Cassette(path)) as svc:
        with pytest.raises(anthropic.BadRequestError) as caught:
            streamed(svc, "something never recorded")
        [record] = svc.model_requests("r-1")
    assert record["outcome"] == "rejected" and record["cassette"] == "missing"
    assert f"request {record['request_digest']}" in str(caught.value) and "is not in the cassette" in str(caught.value)
    assert record["error"] in str(caught.value)
    with Services.start(script=[], cassette=Cassette(path, "fallback")) as svc:  # fallback: the default policy
        assert streamed(svc, "something never recorded").content[0].text.startswith("answer ")


def test_the_script_comes_before_the_cassette(tmp_path: Path):
    path = tmp_path / "answers.jsonl"
    with anthropic_api() as upstream, Services.start(script=[], cassette=recorder(path, upstream)) as svc:
        anthropic_loop(svc)
    with Services.start(script=[{"when": {"text": "Refund"}, "then": [{"say": "pinned"}]}],
                        cassette=Cassette(path)) as svc:
        client = anthropic.Anthropic(base_url=svc.url("model", "r-1"), api_key="k", max_retries=0)
        pinned = client.messages.create(model="claude-haiku-4-5", max_tokens=64,
                                        messages=[{"role": "user", "content": "Refund my order please."}])
    assert pinned.content[0].text == "pinned"


def test_an_upstream_that_refuses_is_said_and_nothing_is_recorded(tmp_path: Path):
    path = tmp_path / "answers.jsonl"
    with anthropic_api() as upstream, Services.start(
            script=[], cassette=Cassette(path, "record", {"model": upstream.url + "/nowhere"}, environ={})) as svc:
        with pytest.raises(anthropic.APIStatusError) as caught:
            streamed(svc, "hello")
        [record] = svc.model_requests("r-1")
    assert "answered 404" in str(caught.value) and record["cassette"] == "upstream-failed"
    assert not path.exists() or path.read_text() == ""
    assert upstream.seen[0][0]["x-api-key"] == "k"  # no key of its own: the client's is forwarded


def test_the_environment_names_the_cassette_and_a_bad_one_is_refused(tmp_path: Path):
    assert from_environment({}) is None
    with pytest.raises(CassetteError, match="no cassette at"):
        from_environment({"KILLPOINT_MODEL_CASSETTE": str(tmp_path / "missing.jsonl")})
    (tmp_path / "bad.jsonl").write_text('{"api": "messages"}\n')
    with pytest.raises(CassetteError, match="bad.jsonl:1"):
        from_environment({"KILLPOINT_MODEL_CASSETTE": str(tmp_path / "bad.jsonl")})
    with pytest.raises(CassetteError, match="needs an upstream"):
        from_environment({"KILLPOINT_MODEL_CASSETTE": str(tmp_path / "new.jsonl"),
                          "KILLPOINT_MODEL_CASSETTE_MODE": "record"})
    recording = from_environment({"KILLPOINT_MODEL_CASSETTE": str(tmp_path / "new.jsonl"),
                                  "KILLPOINT_MODEL_CASSETTE_MODE": "record", "KILLPOINT_MODEL_UPSTREAM": "http://x"})
    assert recording is not None and recording.mode == "record" and recording.upstreams == {"model": "http://x"}
