"""Window compaction: keep the checkpointed model context under a size budget.

The runtime compacts the window *before* a checkpoint is written, so the stored window is the one the next
step sends (the model must see what the checkpoint says it saw). The rule is deterministic, so a resumed
run compacts exactly as an uninterrupted one:

- a window whose JSON size is within ``budget`` (characters) is kept as it is;
- otherwise the first message (the task) is kept, followed by the longest tail of the window that fits and
  starts with an assistant message (roles keep alternating); the first message's text gets a note of how
  many messages were dropped (counting earlier compactions), with a short excerpt of the last few, so the
  note does not grow as the run goes on.
"""

from __future__ import annotations

import json
from typing import Any

from .checkpoint import Message

EXCERPT_CHARS = 60
EXCERPTS = 4
NOTE_MARK = "\n\n[compacted: "

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


def _split_head(text: str) -> tuple[str, int]:
    """The task text of a first message, and how many messages earlier compactions already dropped."""
    if NOTE_MARK not in text:
        return text, 0
    task, note = text.split(NOTE_MARK, 1)
    count = note.split(" ", 1)[0]
    return task, int(count) if count.isdigit() else 0


def _head(head: Message, dropped: list[Message]) -> Message:
    task, earlier = _split_head(text_of(head.get("content")))
    lines = [f"{NOTE_MARK.lstrip()}{earlier + len(dropped)} earlier messages omitted; the last ones:]"]
    for m in dropped[-EXCERPTS:]:
        lines.append(f"- {m.get('role')}: {text_of(m.get('content'))[:EXCERPT_CHARS]}")
    return {"role": head.get("role", "user"), "content": task + "\n\n" + "\n".join(lines)}


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
        candidate = [_head(head, rest[:i]), *rest[i:]]
        best = candidate
        if size(candidate) <= budget:
            return candidate
    return best if best is not None else window
