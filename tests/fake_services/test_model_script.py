"""Scripted model answers: a user's table or function drives the tool calls they chose, through the real
SDKs of every API the fakes serve; scripts load from a step module's value, files and the environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from killpoint.fake_services import Services
from killpoint.fake_services.script import Script, ScriptError, from_environment, load_script
from killpoint.fake_services.turns import Call

openai = pytest.importorskip("openai")

REFUND_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
                 "required": ["order_id", "amount"]}
MODEL_SCRIPT = [  # the example: "when the tools include issue_refund, call it ..., then say done"
    {"when": {"tool": "issue_refund"},
     "then": [{"call": "issue_refund", "arguments": {"order_id": "A-17", "amount": 4200}}, {"say": "done"}]},
]
TOML = """
rounds = 1
[[rules]]
when = { tool = "issue_refund" }
then = [
  { call = "issue_refund", arguments = { order_id = "A-17", amount = 4200 } },
  { say = "done" },
]
"""


def anthropic_loop(svc: Services) -> tuple[Any, Any]:
    client = anthropic.Anthropic(base_url=svc.url("model", "r-1"), api_key="k", max_retries=0)
    tools = [{"name": "issue_refund", "input_schema": REFUND_SCHEMA}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Refund my order please."}]
    first = client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=messages, tools=tools)
    [use] = [b for b in first.content if b.type == "tool_use"]
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "re_1"}]}]
    return use, client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=messages, tools=tools)


def test_a_scripted_table_drives_the_anthropic_tool_call():
    with Services.start(script=MODEL_SCRIPT) as svc:
        use, final = anthropic_loop(svc)
    assert (use.name, use.input) == ("issue_refund", {"order_id": "A-17", "amount": 4200})
    assert final.content[0].text == "done" and final.stop_reason == "end_turn"


def test_the_same_script_drives_openai_chat_and_responses():
    with Services.start(script=MODEL_SCRIPT) as svc:
        client = openai.OpenAI(api_key="k", base_url=svc.url("openai", "r-1") + "/v1", max_retries=0)
        tools = [{"type": "function", "function": {"name": "issue_refund", "parameters": REFUND_SCHEMA}}]
        ask = [{"role": "user", "content": "Refund my order please."}]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=ask, tools=tools)
        [call] = first.choices[0].message.tool_calls
        assert json.loads(call.function.arguments) == {"order_id": "A-17", "amount": 4200}
        done = client.chat.completions.create(model="gpt-4o-mini", tools=tools, messages=[
            *ask, first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "re_1"}])
        assert done.choices[0].message.content == "done"
        response = client.responses.create(model="gpt-4o-mini", input="Refund my order please.", tools=[
            {"type": "function", "name": "issue_refund", "parameters": REFUND_SCHEMA}])
        assert json.loads(response.output[0].arguments) == {"order_id": "A-17", "amount": 4200}


def test_a_function_script_sees_the_tool_results_and_falls_back_to_the_default():
    seen: list[Call] = []

    def script(request: Call) -> Any:
        seen.append(request)
        if request.dialogue.results:
            return {"say": f"refunded with {request.dialogue.results[0].content}"}
        return None  # the default policy: a call with schema-valid arguments

    with Services.start(script=script) as svc:
        use, final = anthropic_loop(svc)
    assert use.name == "issue_refund" and set(use.input) == {"order_id", "amount"}
    assert final.content[0].text == "refunded with re_1"
    assert seen[1].dialogue.results[0].name == "issue_refund" and seen[1].dialogue.rounds == 1
    assert seen[0].api == "messages" and seen[0].dialogue.user_text == "Refund my order please."


def test_scripts_load_from_toml_json_python_and_the_environment(tmp_path: Path, monkeypatch):
    (tmp_path / "script.toml").write_text(TOML)
    (tmp_path / "script.json").write_text(json.dumps({"rules": MODEL_SCRIPT, "rounds": 2}))
    (tmp_path / "steps.py").write_text(f"MODEL_SCRIPT = {MODEL_SCRIPT!r}\n")
    loaded = [load_script(tmp_path / name) for name in ("script.toml", "script.json", "steps.py")]
    assert [s.rules for s in loaded] == [loaded[0].rules] * 3 and loaded[1].settings.rounds == 2
    monkeypatch.setenv("KILLPOINT_MODEL_SCRIPT", str(tmp_path / "script.toml"))
    assert from_environment().rules == loaded[0].rules
    with Services.start() as svc:  # fakes started without a script read the environment's
        use, final = anthropic_loop(svc)
    assert use.input == {"order_id": "A-17", "amount": 4200} and final.content[0].text == "done"
    monkeypatch.setenv("KILLPOINT_MODEL_SCRIPT", "")
    assert from_environment() == Script()


@pytest.mark.parametrize("bad", [
    [{"when": {"tools": "x"}, "say": "hi"}],  # an unknown condition
    [{"when": {"tool": "x"}}],  # no answer
    [{"then": [{"calls": []}]}],
    [{"then": {"call": "x", "arguments": [1]}}],
    {"rules": [], "temperature": 0},
    str(Path(__file__).parent / "missing.toml"),
])
def test_a_malformed_script_is_refused_with_its_problem(bad):
    with pytest.raises(ScriptError):
        load_script(bad)


def fails(request: Call) -> Any:
    raise KeyError("order")


@pytest.mark.parametrize(("script", "problem"), [(lambda request: {"reply": "?"}, "model script answer"),
                                                 (fails, "function raised KeyError")])
def test_a_bad_scripted_answer_is_a_400_naming_the_script(script, problem):
    with Services.start(script=script) as svc:
        client = anthropic.Anthropic(base_url=svc.url("model", "r-1"), api_key="k", max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match=problem):
            client.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        assert svc.model_requests("r-1")[0]["outcome"] == "rejected"
