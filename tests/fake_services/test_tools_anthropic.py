"""The real anthropic SDK against the fake model's tool use: tool calls whose input satisfies the tool's
schema, tool-result round trips, parallel calls, streamed input_json_delta, tool_choice, structured output,
determinism, and the kill point and journal seeing tool requests."""

from __future__ import annotations

import threading
from typing import Any

import anthropic
import pytest
from pydantic import BaseModel

from killpoint.fake_services import Decision, Services
from killpoint.fake_services.schema_values import satisfies

MODEL = "claude-sonnet-4-6"
ASK = [{"role": "user", "content": "Order A-17 arrived broken: refund it."}]
REFUND = {"name": "issue_refund", "description": "Refund an order.",
          "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"},
                                                            "amount_cents": {"type": "integer", "minimum": 1},
                                                            "reason": {"enum": ["damaged", "late"]}},
                           "required": ["order_id", "amount_cents", "reason"], "additionalProperties": False}}
LOOKUP = {"name": "lookup_order", "description": "Find an order.",
          "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}
TOOLS = [REFUND, LOOKUP]
SCHEMAS = {t["name"]: t["input_schema"] for t in TOOLS}


def sdk(svc: Services, run: str = "r-1") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=svc.url("model", run), api_key="test-key", max_retries=0)


def ask(client: anthropic.Anthropic, messages: list[dict[str, Any]] = ASK, **kw: Any) -> Any:
    return client.messages.create(model=MODEL, max_tokens=512, messages=messages, tools=kw.pop("tools", TOOLS), **kw)


def uses(message: Any) -> list[Any]:
    return [b for b in message.content if b.type == "tool_use"]


def results_for(message: Any, content: str = "ok") -> list[dict[str, Any]]:
    """The conversation after ``message``: the assistant turn as sent back, then a result per tool call."""
    return [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": content}
                                         for b in uses(message)]}]


def test_offered_tools_get_a_call_whose_input_satisfies_the_schema(svc):
    reply = ask(sdk(svc))
    [call] = uses(reply)
    assert reply.stop_reason == "tool_use" and call.id.startswith("toolu_") and call.name in SCHEMAS
    assert satisfies(call.input, SCHEMAS[call.name])
    [record] = svc.model_requests("r-1")
    assert record["tools"] == ["issue_refund", "lookup_order"] and record["stop_reason"] == "tool_use"
    assert record["tool_calls"] == [{"id": call.id, "name": call.name, "arguments": call.input}]


def test_after_the_tool_results_the_model_answers_in_text(svc):
    client = sdk(svc)
    first = ask(client)
    second = ask(client, ASK + results_for(first, "refund re_1 issued"))
    assert second.stop_reason == "end_turn" and uses(second) == []
    assert second.content[0].text.startswith("answer ") and "verdict=" in second.content[0].text
    record = svc.model_requests("r-1")[1]
    assert record["messages"][-1]["content"][0]["tool_use_id"] == uses(first)[0].id  # the journal keeps results


def test_the_same_request_gets_the_same_ids_and_arguments(svc):
    first, again = ask(sdk(svc)), ask(sdk(svc, "r-2"))
    assert [(b.id, b.name, b.input) for b in uses(first)] == [(b.id, b.name, b.input) for b in uses(again)]
    assert first.id == again.id and first.usage == again.usage
    other = ask(sdk(svc), [{"role": "user", "content": "Order B-2 is late."}])
    assert uses(other)[0].id != uses(first)[0].id


def test_parallel_calls_when_the_script_allows_several(svc):
    svc.set_script({"calls": 2})
    reply = ask(sdk(svc))
    assert sorted(b.name for b in uses(reply)) == ["issue_refund", "lookup_order"]
    assert len({b.id for b in uses(reply)}) == 2
    follow = ask(sdk(svc), ASK + results_for(reply))
    assert follow.stop_reason == "end_turn"
    serial = ask(sdk(svc), tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert len(uses(serial)) == 1


def test_streaming_sends_the_input_as_json_deltas(svc):
    plain = ask(sdk(svc, "r-plain"))
    with sdk(svc).messages.stream(model=MODEL, max_tokens=512, messages=ASK, tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [e.delta.partial_json for e in events if e.type == "content_block_delta"
              and e.delta.type == "input_json_delta"]
    assert len(deltas) == 2 and all(deltas)
    assert final.stop_reason == "tool_use"
    assert [(b.id, b.name, b.input) for b in uses(final)] == [(b.id, b.name, b.input) for b in uses(plain)]


def test_tool_choice_none_any_and_a_named_tool(svc):
    client = sdk(svc)
    assert uses(ask(client, tool_choice={"type": "none"})) == []
    answered = ASK + results_for(ask(client))
    assert uses(ask(client, answered)) == []  # auto: one round, then text
    assert len(uses(ask(client, answered, tool_choice={"type": "any"}))) == 1  # forced: a call every time
    for name in ("issue_refund", "lookup_order"):
        [call] = uses(ask(client, tool_choice={"type": "tool", "name": name}))
        assert call.name == name and satisfies(call.input, SCHEMAS[name])
    with pytest.raises(anthropic.BadRequestError, match="not among the tools"):
        ask(client, tool_choice={"type": "tool", "name": "delete_everything"})


class Triage(BaseModel):
    order_id: str
    refund: bool
    amount_cents: int
    notes: list[str]


def test_structured_output_parses_into_the_model(svc):
    parsed = sdk(svc).messages.parse(model=MODEL, max_tokens=512, messages=ASK, output_format=Triage)
    assert isinstance(parsed.parsed_output, Triage) and parsed.stop_reason == "end_turn"
    forced = ask(sdk(svc), tools=[{"name": "record_triage", "input_schema": Triage.model_json_schema()}],
                 tool_choice={"type": "tool", "name": "record_triage"})
    Triage.model_validate(uses(forced)[0].input)  # the classic forced-tool structured output


def test_a_held_tool_request_waits_at_model_request_and_is_journaled(svc):
    held, release = threading.Event(), threading.Event()

    def hook(point: str, info: dict[str, Any]) -> Decision:
        if point == "model.request":
            held.set()
            release.wait(5)
        return Decision.GO

    svc.set_hook(hook)
    replies: list[Any] = []
    sender = threading.Thread(target=lambda: replies.append(ask(sdk(svc))))
    sender.start()
    assert held.wait(5)
    assert [a["outcome"] for a in svc.attempts("r-1")] == ["pending"] and svc.model_requests("r-1") == []
    release.set()
    sender.join(5)
    [record] = svc.model_requests("r-1")
    assert record["outcome"] == "applied" and record["tool_calls"][0]["id"] == uses(replies[0])[0].id
