"""Window compaction: keep the checkpointed model context under a size budget.

The runtime compacts the window *before* a checkpoint is written, so the stored window is the one the next
step sends (the model must see what the checkpoint says it saw). The rule is deterministic, so a resumed
run compacts exactly as an uninterrupted one:

- a window whose JSON size is within ``budget`` (characters) is kept as it is;
- otherwise the first message (the task) is kept, followed by the longest tail of the window that fits and
  starts with an assistant message (roles keep alternating), and the messages dropped between them are
  replaced by a one-line note per message appended to the first message's text.
"""

from __future__ import annotations

import json
from typing import Any

from .checkpoint import Message

EXCERPT_CHARS = 60


def size(window: list[Message]) -> int:
    """The size the budget is measured in: characters of the window's compact JSON."""
    return len(json.dumps(window, separators=(",", ":"), ensure_ascii=False))


def text_of(content: Any) -> str:
    """The text of a message's content (a string or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


def _note(dropped: list[Message]) -> str:
    lines = [f"[compacted: {len(dropped)} earlier messages omitted]"]
    for m in dropped:
        lines.append(f"- {m.get('role')}: {text_of(m.get('content'))[:EXCERPT_CHARS]}")
    return "\n".join(lines)


def compact(window: list[Message], budget: int) -> list[Message]:
    """Return ``window`` if it is within ``budget``, else a compacted copy (see the module docstring).

    When even the first message and the last exchange exceed the budget the result is the smallest window
    the rule allows; it may then still exceed the budget.
    """
    if size(window) <= budget or len(window) < 3:
        return window
    head, rest = window[0], window[1:]
    starts = [i for i, m in enumerate(rest) if m.get("role") == "assistant"]
    best: list[Message] | None = None
    for i in starts:  # earliest start first: the longest tail that fits wins
        if i == 0:
            continue  # dropping nothing is not compaction
        new_head = {"role": head.get("role", "user"),
                    "content": text_of(head.get("content")) + "\n\n" + _note(rest[:i])}
        candidate = [new_head, *rest[i:]]
        best = candidate
        if size(candidate) <= budget:
            return candidate
    return best if best is not None else window
