"""Tool use and structured output in the OpenAI APIs, read from a request body into the neutral ``turns``
values.

Chat Completions: ``tools`` ``[{"type": "function", "function": {"name", "description"?, "parameters"?}}]``;
``tool_choice`` ``"auto" | "none" | "required" | {"type": "function", "function": {"name"}}``;
``parallel_tool_calls`` (default true); ``response_format`` ``{"type": "json_schema", "json_schema":
{"name", "schema"}}`` or ``{"type": "json_object"}``. The dialogue: an assistant message with
``tool_calls`` is a tool-calling turn, ``role: tool`` messages its results.

Responses: ``tools`` ``[{"type": "function", "name", "description"?, "parameters"?}]`` (other tool types,
such as ``web_search``, are not the fake's to call and are left out); ``tool_choice`` ``"auto" | "none" |
"required" | {"type": "function", "name"}``; ``parallel_tool_calls``; ``text.format`` ``{"type":
"json_schema", "name", "schema"}`` or ``{"type": "json_object"}``. The dialogue: ``function_call`` items
(one turn however many in a row) and their ``function_call_output`` items.

A tool choice naming no offered tool is a 400, as the real API answers.
"""

from __future__ import annotations

from typing import Any

from .policy import JSON_MODE
from .turns import Dialogue, Tool, ToolChoice, ToolResult, text_of
from .wire import BadRequest

NO_ARGUMENTS = {"type": "object", "properties": {}}


def tools_of(body: dict[str, Any], nested: bool) -> tuple[Tool, ...]:
    """The function tools; ``nested``: Chat Completions' ``{"function": {...}}`` shape, else Responses'."""
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise BadRequest("tools: a list is required")
    tools = []
    for tool in raw:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        spec = tool.get("function") if nested else tool
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise BadRequest("tools: each function tool needs a name")
        tools.append(Tool(spec["name"], str(spec.get("description") or ""), spec.get("parameters") or NO_ARGUMENTS))
    return tuple(tools)


def choice_of(body: dict[str, Any], tools: tuple[Tool, ...], nested: bool) -> ToolChoice:
    raw = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls") is not False
    if raw is None or raw in ("auto", "none", "required"):
        return ToolChoice(raw or "auto", None, parallel)
    spec = raw.get("function") if nested and isinstance(raw, dict) else raw
    name = spec.get("name") if isinstance(spec, dict) else None
    if not isinstance(raw, dict) or raw.get("type") != "function" or not isinstance(name, str):
        raise BadRequest("tool_choice: \"auto\", \"none\", \"required\" or a function tool is required")
    if name not in {t.name for t in tools}:
        raise BadRequest(f"tool_choice: the function {name!r} is not among the tools offered")
    return ToolChoice("tool", name, parallel)


def output_of(fmt: Any, where: str) -> Any:
    """The output schema of a ``response_format`` (chat) or ``text.format`` (responses); None for text."""
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") == "text"):
        return None
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return JSON_MODE
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") if "json_schema" in fmt else fmt
        if isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
            return spec["schema"]
    raise BadRequest(f"{where}: type text, json_object or json_schema (with a schema) is required")


def chat_dialogue(messages: list[Any]) -> Dialogue:
    names: dict[str, str] = {}
    user_text, rounds, results = "", 0, ()
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            user_text, rounds, results = text_of(message.get("content")), 0, ()
        elif role == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            names.update({str(c.get("id")): str((c.get("function") or {}).get("name")) for c in calls})
            rounds += bool(calls)
            results = ()
        elif role == "tool":
            key = str(message.get("tool_call_id"))
            results = (*results, ToolResult(key, names.get(key), message.get("content")))
    return Dialogue(user_text, rounds, results)


def responses_dialogue(items: list[Any]) -> Dialogue:
    names: dict[str, str] = {}
    user_text, rounds, results, calling = "", 0, (), False
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            names[str(item.get("call_id"))] = str(item.get("name"))
            rounds += not calling
            calling, results = True, ()
            continue
        calling = False
        if kind == "function_call_output":
            key = str(item.get("call_id"))
            results = (*results, ToolResult(key, names.get(key), item.get("output")))
        elif kind == "message" and item.get("role") == "user":
            user_text, rounds, results = text_of(item.get("content")), 0, ()
        elif kind == "message":
            results = ()
    return Dialogue(user_text, rounds, results)
