"""Tool use in the Anthropic Messages API, read from a request body into the neutral ``turns`` values.

- ``tools``: the client tools (``{"name", "description"?, "input_schema"}``); server tools (a ``type`` such
  as ``web_search_20250305``, no ``input_schema``) are not the fake's to call and are left out.
- ``tool_choice``: ``{"type": "auto" | "any" | "tool" | "none", "name"?, "disable_parallel_tool_use"?}``;
  ``any`` is ``required``; absent is ``auto``. A ``tool`` choice naming no offered tool is a 400.
- ``output_config.format`` (or the beta's top-level ``output_format``) ``{"type": "json_schema",
  "schema"}``: structured output (what ``client.messages.parse(output_format=Model)`` sends).
- the dialogue: a user message holding ``tool_result`` blocks is a tool round's results; an assistant
  message holding ``tool_use`` blocks is a tool-calling turn.
"""

from __future__ import annotations

from typing import Any

from .turns import Dialogue, Tool, ToolChoice, ToolResult, text_of
from .wire import BadRequest

CHOICES = {"auto": "auto", "any": "required", "tool": "tool", "none": "none"}


def tools_of(body: dict[str, Any]) -> tuple[Tool, ...]:
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise BadRequest("tools: a list is required")
    tools = []
    for tool in raw:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise BadRequest("tools: each tool needs a name")
        if "input_schema" not in tool:
            continue  # a server tool (web search, code execution...): the fake does not call it
        if not isinstance(tool["input_schema"], dict):
            raise BadRequest(f"tools.{tool['name']}.input_schema: an object is required")
        tools.append(Tool(tool["name"], str(tool.get("description") or ""), tool["input_schema"]))
    return tuple(tools)


def choice_of(body: dict[str, Any], tools: tuple[Tool, ...]) -> ToolChoice:
    raw = body.get("tool_choice")
    if raw is None:
        return ToolChoice()
    if not isinstance(raw, dict) or raw.get("type") not in CHOICES:
        raise BadRequest("tool_choice: {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"} is required")
    name = raw.get("name")
    if raw["type"] == "tool" and name not in {t.name for t in tools}:
        raise BadRequest(f"tool_choice: the tool {name!r} is not among the tools offered")
    return ToolChoice(CHOICES[raw["type"]], name, not raw.get("disable_parallel_tool_use", False))


def output_of(body: dict[str, Any]) -> Any:
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else body.get("output_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise BadRequest("output_config.format: {\"type\": \"json_schema\", \"schema\": {...}} is required")
    return fmt["schema"]


def dialogue_of(messages: list[Any]) -> Dialogue:
    names: dict[str, str] = {}
    user_text, rounds, results = "", 0, ()
    for message in messages:
        if not isinstance(message, dict):
            continue
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        typed = [b for b in blocks if isinstance(b, dict)]
        if message.get("role") == "assistant":
            uses = [b for b in typed if b.get("type") == "tool_use"]
            names.update({str(b.get("id")): str(b.get("name")) for b in uses})
            rounds += bool(uses)
            results = ()
        elif message.get("role") == "user":
            answered = [b for b in typed if b.get("type") == "tool_result"]
            if not answered:
                user_text, rounds = text_of(message.get("content")), 0
            results = tuple(ToolResult(str(b.get("tool_use_id")), names.get(str(b.get("tool_use_id"))),
                                       b.get("content"), bool(b.get("is_error"))) for b in answered)
    return Dialogue(user_text, rounds, results)
