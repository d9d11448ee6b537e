"""The fake model's default answer, with no configuration: a pure function of the request.

Contract: :func:`default_turn` depends only on (call, digest, settings, id prefix), so the same request
always gets the same turn (same call ids, same arguments, same text): a replayed step sees what the first
run saw.

1. Tools offered and allowed (tool choice not ``none``) and either a call is forced (``required`` /
   Anthropic's ``any``, or a named tool) or, under ``auto``, fewer than ``settings.rounds`` tool-calling
   turns were taken since the last user message: call tools. A named tool is called alone; otherwise
   ``settings.calls`` tools at most (1 when parallel calls are off), starting at a tool chosen by the
   digest. Each call's arguments satisfy its tool's JSON schema (``schema_values.value_for``, seeded by the
   digest and the call's index); its id is ``prefix`` + 24 characters of the digest and index.
2. Else, an output schema (structured output): its JSON text, a value satisfying the schema; JSON mode
   (a bare ``{"type": "object"}``) gets ``{"answer": <the text of step 3>}``.
3. Else the text ``answer <digest[:12]> verdict=<approve|review>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .schema_values import value_for
from .turns import Call, ToolCall, Turn, call_id

VERDICTS = ("approve", "approve", "approve", "review")
JSON_MODE = {"type": "object"}


@dataclass(frozen=True)
class Settings:
    """``rounds``: tool-calling turns the model takes under ``auto`` after each user message before it
    answers in text; ``calls``: calls in one turn at most, when parallel calls are allowed."""

    rounds: int = 1
    calls: int = 1

    def __post_init__(self) -> None:
        if self.rounds < 0 or self.calls < 1:
            raise ValueError(f"rounds must be >= 0 and calls >= 1 (got rounds={self.rounds}, calls={self.calls})")


def default_text(digest: str) -> str:
    """The text answer (step 3)."""
    return f"answer {digest[:12]} verdict={VERDICTS[int(digest[12:20], 16) % len(VERDICTS)]}"


def wants_calls(call: Call, settings: Settings) -> bool:
    """Step 1's condition: tools offered, allowed, and forced or still within ``settings.rounds``."""
    if not call.tools or call.choice.mode == "none":
        return False
    return call.choice.mode in ("required", "tool") or call.dialogue.rounds < settings.rounds


def planned_calls(call: Call, digest: str, settings: Settings, prefix: str) -> tuple[ToolCall, ...]:
    """Step 1's calls."""
    if call.choice.mode == "tool":
        named = call.tool(call.choice.name or "")
        tools = [named] if named is not None else []
    else:
        count = min(settings.calls if call.choice.parallel else 1, len(call.tools))
        start = int(digest[:8], 16) % len(call.tools)
        tools = [call.tools[(start + i) % len(call.tools)] for i in range(count)]
    return tuple(ToolCall(call_id(prefix, digest, i), tool.name, value_for(tool.schema, f"{digest}:{i}"))
                 for i, tool in enumerate(tools) if tool is not None)


def structured_text(call: Call, digest: str) -> str:
    """Step 2's JSON text."""
    value = {"answer": default_text(digest)} if call.output == JSON_MODE else value_for(call.output, digest)
    return json.dumps(value, ensure_ascii=False)


def default_turn(call: Call, digest: str, settings: Settings, prefix: str) -> Turn:
    """The default answer to ``call`` (see the module docstring)."""
    if wants_calls(call, settings):
        return Turn("", planned_calls(call, digest, settings, prefix))
    if call.output is not None:
        return Turn(structured_text(call, digest))
    return Turn(default_text(digest))
