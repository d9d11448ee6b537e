"""The model fakes' neutral vocabulary, shared by every API they serve: the tools a request offers, how
it lets the model use them, the tool calls and results in its conversation, and the model's turn.

Each API module (``model.py`` for Anthropic Messages, ``openai_api.py`` for Chat Completions and
Responses) reads its wire format into these values and writes a :class:`Turn` back in its own; the policy
(``policy.py``) and the user's script (``script.py``) only ever see these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ChoiceMode = Literal["auto", "required", "none", "tool"]


@dataclass(frozen=True)
class Tool:
    """A function tool the request offers: its name, description and JSON schema of its arguments."""

    name: str
    description: str = ""
    schema: Any = field(default_factory=lambda: {"type": "object", "properties": {}})

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "schema": self.schema}


@dataclass(frozen=True)
class ToolChoice:
    """How the request lets the model use its tools: ``auto`` (may call), ``required`` (must call one:
    Anthropic's ``any``, OpenAI's ``required``), ``none`` (must not call), ``tool`` (must call ``name``);
    ``parallel``: whether one turn may hold several calls."""

    mode: ChoiceMode = "auto"
    name: str | None = None
    parallel: bool = True

    def as_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "name": self.name, "parallel": self.parallel}


@dataclass(frozen=True)
class ToolCall:
    """One call the model makes: ``id`` is the API's (``toolu_…``, ``call_…``), ``arguments`` a JSON object."""

    id: str
    name: str
    arguments: Any

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ToolResult:
    """A tool result the agent sent back: the call it answers (its id and, when found in the conversation,
    its tool's name) and its content as the agent sent it (a string, or the API's content blocks)."""

    call_id: str
    name: str | None
    content: Any
    is_error: bool = False


@dataclass(frozen=True)
class Turn:
    """The model's answer: ``text`` (may be empty when it calls tools) and ``calls`` (none: a text answer)."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.calls else "end_turn"


@dataclass(frozen=True)
class Dialogue:
    """What the conversation so far says, read from an API's messages: ``user_text`` the last user
    message's text; ``rounds`` how many tool-calling turns the model took since that message; ``results``
    the tool results at the end of the conversation (empty unless the last message holds them)."""

    user_text: str = ""
    rounds: int = 0
    results: tuple[ToolResult, ...] = ()


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the ``text`` of its text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text")) for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def call_id(prefix: str, digest: str, index: int) -> str:
    """A call's id: the API's prefix, then 24 characters fixed by the request digest and the call's index."""
    return f"{prefix}{digest[:22]}{index:02d}"


@dataclass(frozen=True)
class Call:
    """One model request as the fake understands it, whatever the API: what the answer depends on
    (``model``, ``system``, ``messages``, and the tools, tool choice and output schema when given), the
    token limit (None: none), whether to stream, and the body as sent.

    ``api`` names the API (``messages``, ``chat.completions``, ``responses``); ``tools`` the function
    tools offered; ``choice`` how they may be used; ``output`` the JSON schema the answer must satisfy
    (structured output; ``{"type": "object"}`` for JSON mode), None for free text; ``dialogue`` what the
    conversation so far says (the last user text, the tool rounds since, the trailing tool results).
    """

    model: str
    system: Any
    messages: list[Any]
    max_tokens: int | None
    stream: bool
    body: dict[str, Any]
    api: str = ""
    tools: tuple[Tool, ...] = ()
    choice: ToolChoice = ToolChoice()
    output: Any = None
    dialogue: Dialogue = Dialogue()

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def tool(self, name: str) -> Tool | None:
        """The offered tool called ``name``, or None."""
        return next((t for t in self.tools if t.name == name), None)

    def shape(self) -> dict[str, Any]:
        """What the answer depends on besides (model, system, messages): the tools, the tool choice and the
        output schema; empty when the request has none of them (so a plain request's digest is unchanged)."""
        if not self.tools and self.output is None:
            return {}
        return {"tools": [t.as_json() for t in self.tools], "tool_choice": self.choice.as_json(),
                "output": self.output}
