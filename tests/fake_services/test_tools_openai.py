"""The real openai SDK against the fake OpenAI's tool use and structured output: Chat Completions
(tool_calls, round trips, parallel_tool_calls, streamed deltas, tool_choice, parse() and JSON mode) and
Responses (function_call items, function_call_output round trips, responses.parse)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from killpoint.fake_services import Services
from killpoint.fake_services.schema_values import satisfies

openai = pytest.importorskip("openai")

MODEL = "gpt-4o-mini"
ASK = [{"role": "user", "content": "Order A-17 arrived broken: refund it."}]
REFUND_ARGS = {"type": "object", "properties": {"order_id": {"type": "string"},
                                                "amount_cents": {"type": "integer", "minimum": 1}},
               "required": ["order_id", "amount_cents"], "additionalProperties": False}
LOOKUP_ARGS = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
SCHEMAS = {"issue_refund": REFUND_ARGS, "lookup_order": LOOKUP_ARGS}
CHAT_TOOLS = [{"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in SCHEMAS.items()]
RESPONSE_TOOLS = [{"type": "function", "name": name, "parameters": schema} for name, schema in SCHEMAS.items()]


class Triage(BaseModel):
    order_id: str
    refund: bool
    amount_cents: int
    tags: list[str]


def sdk(svc: Services, run: str = "r-1") -> Any:
    return openai.OpenAI(api_key="sk-killpoint", base_url=svc.url("openai", run) + "/v1", max_retries=0)


def chat(client: Any, messages: list[dict[str, Any]] = ASK, **kw: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=messages, tools=kw.pop("tools", CHAT_TOOLS), **kw)


def calls(completion: Any) -> list[tuple[str, str, Any]]:
    return [(c.id, c.function.name, json.loads(c.function.arguments))
            for c in completion.choices[0].message.tool_calls or []]


def answered(completion: Any) -> list[dict[str, Any]]:
    """The conversation after ``completion``: its assistant message, then a tool message per call."""
    message = completion.choices[0].message.model_dump(exclude_none=True)
    return [message, *({"role": "tool", "tool_call_id": c.id, "content": "ok"}
                       for c in completion.choices[0].message.tool_calls)]


def test_chat_tool_call_satisfies_the_schema_and_round_trips(svc):
    client = sdk(svc)
    first = chat(client)
    [(call_id, name, arguments)] = calls(first)
    assert first.choices[0].finish_reason == "tool_calls" and call_id.startswith("call_")
    assert first.choices[0].message.content is None and satisfies(arguments, SCHEMAS[name])
    second = chat(client, ASK + answered(first))
    assert second.choices[0].finish_reason == "stop" and second.choices[0].message.tool_calls is None
    assert second.choices[0].message.content.startswith("answer ")
    records = svc.model_requests("r-1")
    assert [r["stop_reason"] for r in records] == ["tool_use", "end_turn"]
    assert records[0]["tool_calls"] == [{"id": call_id, "name": name, "arguments": arguments}]


def test_chat_is_deterministic_and_honours_parallel_tool_calls(svc):
    assert calls(chat(sdk(svc))) == calls(chat(sdk(svc, "r-2")))
    svc.set_script({"calls": 2})
    assert sorted(name for _, name, _ in calls(chat(sdk(svc)))) == ["issue_refund", "lookup_order"]
    assert len(calls(chat(sdk(svc), parallel_tool_calls=False))) == 1


def test_chat_streams_tool_call_deltas(svc):
    plain = calls(chat(sdk(svc, "r-plain")))
    with sdk(svc).chat.completions.stream(model=MODEL, messages=ASK, tools=CHAT_TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    pieces = [e.arguments_delta for e in events if e.type == "tool_calls.function.arguments.delta" and e.arguments_delta]
    assert len(pieces) == 2 and final.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments))
            for c in final.choices[0].message.tool_calls] == plain


def test_chat_tool_choice_none_required_and_named(svc):
    client = sdk(svc)
    assert calls(chat(client, tool_choice="none")) == []
    after = ASK + answered(chat(client))
    assert calls(chat(client, after)) == [] and len(calls(chat(client, after, tool_choice="required"))) == 1
    named = chat(client, tool_choice={"type": "function", "function": {"name": "lookup_order"}})
    assert [name for _, name, _ in calls(named)] == ["lookup_order"]
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        chat(client, tool_choice={"type": "function", "function": {"name": "nope"}})


def test_chat_parse_with_a_pydantic_model_and_json_mode(svc):
    client = sdk(svc)
    parsed = client.chat.completions.parse(model=MODEL, messages=ASK, response_format=Triage)
    assert isinstance(parsed.choices[0].message.parsed, Triage)
    mode = client.chat.completions.create(model=MODEL, messages=ASK, response_format={"type": "json_object"})
    assert isinstance(json.loads(mode.choices[0].message.content), dict)
    strict = client.chat.completions.parse(model=MODEL, messages=ASK,
                                           tools=[openai.pydantic_function_tool(Triage, name="triage")])
    [call] = strict.choices[0].message.tool_calls
    assert isinstance(call.function.parsed_arguments, Triage)


def test_responses_function_call_round_trip_and_parse(svc):
    client = sdk(svc)
    first = client.responses.create(model=MODEL, input="Refund order A-17.", tools=RESPONSE_TOOLS)
    [item] = first.output
    assert item.type == "function_call" and item.call_id.startswith("call_") and item.id.startswith("fc_")
    assert satisfies(json.loads(item.arguments), SCHEMAS[item.name])
    again = client.responses.create(model=MODEL, input="Refund order A-17.", tools=RESPONSE_TOOLS)
    assert (again.output[0].call_id, again.output[0].arguments) == (item.call_id, item.arguments)
    follow = client.responses.create(model=MODEL, tools=RESPONSE_TOOLS, input=[
        {"role": "user", "content": "Refund order A-17."}, item.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": item.call_id, "output": "refund re_1"}])
    assert follow.output_text.startswith("answer ") and follow.output[0].type == "message"
    none = client.responses.create(model=MODEL, input="Refund order A-17.", tools=RESPONSE_TOOLS, tool_choice="none")
    assert [o.type for o in none.output] == ["message"]
    parsed = client.responses.parse(model=MODEL, input="Triage order A-17.", text_format=Triage)
    assert isinstance(parsed.output_parsed, Triage)
