"""Recording OpenAI answers into a cassette (issue 22, item 4, the OpenAI half): the fakes ask a loopback
stand-in for the real OpenAI API (``openai_upstream.py``; never the real one) once per request, Chat
Completions and Responses alike, with the key of the process running the fakes, and write the answers with
no key; a strict replay answers the same calls with the same ids and usage with the upstream gone.

Through the CLI: ``killpoint record --openai-upstream`` around a crash at the tool call of the OpenAI Agents
SDK example (its model script left out, so the answers are the upstream's), then the same trial replayed
from the cassette alone.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from killpoint.fake_services import Services
from killpoint.fake_services.cassette import Cassette
from tests.helpers import REPO
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox
from tests.tools.openai_upstream import USAGE, OpenAIApi, openai_api

openai = pytest.importorskip("openai")
SECRET = "sk-proj-real-secret-key"
CLIENT_KEY = "sk-client-side-key"
TOOLS_CHAT = [{"type": "function", "function": {"name": "issue_refund", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}}}}}]
TOOLS_RESPONSES = [{"type": "function", "name": "charge_card", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}}}}]


def client(svc: Services) -> Any:
    return openai.OpenAI(api_key=CLIENT_KEY, base_url=svc.url("openai", "r-1") + "/v1", max_retries=0)


def conversation(svc: Services) -> dict[str, Any]:
    """A Chat Completions tool loop, a streamed chat answer and a Responses tool loop; what the SDK parsed."""
    c = client(svc)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Refund order A-17."}]
    first = c.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS_CHAT)
    [call] = first.choices[0].message.tool_calls
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "refunded"}]
    second = c.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS_CHAT)
    chunks = c.chat.completions.create(model="gpt-4o-mini", stream=True,
                                       messages=[{"role": "user", "content": "hello"}])
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    asked = [{"role": "user", "content": "Charge order A-17."}]
    r1 = c.responses.create(model="gpt-4o-mini", input=asked, tools=TOOLS_RESPONSES)
    [fc] = [i for i in r1.output if i.type == "function_call"]
    r2 = c.responses.create(model="gpt-4o-mini", tools=TOOLS_RESPONSES, input=[
        *asked, fc.model_dump(exclude_none=True), {"type": "function_call_output", "call_id": fc.call_id,
                                                   "output": "charged"}])
    return {"chat_call": (call.id, call.function.name, json.loads(call.function.arguments)),
            "chat_text": second.choices[0].message.content, "chat_usage": second.usage.prompt_tokens,
            "streamed": streamed, "responses_call": (fc.call_id, fc.name, json.loads(fc.arguments)),
            "responses_text": r2.output_text, "responses_usage": r2.usage.output_tokens}


def test_chat_and_responses_answers_are_recorded_once_without_a_key_and_replayed_offline(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    with openai_api() as upstream:
        recorder = Cassette(path, "record", {"openai": upstream.url}, environ={"OPENAI_API_KEY": SECRET})
        with Services.start(script=[], cassette=recorder) as svc:
            recorded = conversation(svc)
            again = conversation(svc)  # every request already recorded: the upstream is not asked again
    assert recorded == again and len(upstream.seen) == 5
    assert recorded["chat_call"] == ("call_REAL0001", "issue_refund", {"order_id": "A-17", "amount": 4200})
    assert recorded["responses_call"] == ("call_REAL0004", "charge_card", {"order_id": "A-17", "amount_cents": 12500})
    assert (recorded["chat_text"], recorded["streamed"], recorded["responses_text"]) == \
        ("real answer 2", "real answer 3", "real answer 5")
    assert (recorded["chat_usage"], recorded["responses_usage"]) == (USAGE["input"], USAGE["output"])
    assert all(h["authorization"] == f"Bearer {SECRET}" and "stream" not in b for h, b in upstream.seen)
    text = path.read_text()
    assert SECRET not in text and CLIENT_KEY not in text and "authorization" not in text.lower()
    assert [json.loads(line)["api"] for line in text.splitlines()] == ["chat.completions"] * 3 + ["responses"] * 2

    with Services.start(script=[], cassette=Cassette(path)) as svc:  # strict; nothing listens upstream now
        assert conversation(svc) == recorded
        with pytest.raises(openai.BadRequestError, match="is not in the cassette"):
            client(svc).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "new"}])


def killpoint(box: Sandbox, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return box.run(*args, timeout=600, path_first=(REPO / "examples" / "tool_agents",),
                   env={"KILLPOINT_IMPORT_TIMEOUT": "300", **env})


def test_killpoint_record_against_an_openai_upstream_then_the_trial_replays_from_the_cassette(
        sandbox: Sandbox) -> None:
    pytest.importorskip("agents", reason="the OpenAI Agents SDK is not installed: pip install 'killpoint[tool-agents]'")
    pytest.importorskip("stripe")
    cassette = sandbox.root / "answers.jsonl"
    trial = ("replay", "--scenario", "crash-points", "--schedule", "bill:effect.applied:kill",
             "--steps", "tests.tools.openai_billing_unscripted", "--out", str(sandbox.out))
    with openai_api() as upstream:
        recorded = killpoint(sandbox, "record", "--cassette", str(cassette), "--openai-upstream", upstream.url,
                             *trial, OPENAI_API_KEY=SECRET)
    _assert_recorded(recorded, upstream, cassette)
    replayed = killpoint(sandbox, *trial, KILLPOINT_MODEL_CASSETTE=str(cassette))
    assert replayed.returncode == 0 and "PASS     crash-points" in replayed.stdout, describe(replayed)
    assert not sandbox.survivors(), sandbox.survivors()


def _assert_recorded(proc: subprocess.CompletedProcess[str], upstream: OpenAIApi, cassette: Path) -> None:
    """The recording run passed; each distinct request went upstream once, with the real key; the cassette
    holds one Responses answer per request and no key; the upstream's tool call was the one the agent ran."""
    assert proc.returncode == 0 and "PASS     crash-points" in proc.stdout, describe(proc)
    bodies = {json.dumps(b, sort_keys=True) for _, b in upstream.seen}
    assert upstream.seen and len(bodies) == len(upstream.seen)
    assert {h["authorization"] for h, _ in upstream.seen} == {f"Bearer {SECRET}"}
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert len(lines) == len(bodies) and {line["api"] for line in lines} == {"responses"}
    assert SECRET not in cassette.read_text() and "killpoint-fake-key" not in cassette.read_text()
    assert any(c["name"] == "charge_card" and c["arguments"] == {"order_id": "A-17", "amount_cents": 12500}
               for line in lines for c in line["calls"])
