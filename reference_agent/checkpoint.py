"""The checkpoint: the smallest thing from which a run can continue (not the transcript).

It is stored whole, as JSON, in ``checkpoints.data``; ``seq`` and ``status`` are copied into columns so
that the monotonic guard and the sweeper can read them without parsing the payload.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

DONE = "done"
"""The terminal cursor: a run whose cursor is ``DONE`` has nothing left to do."""

RUNNING, PAUSED, FINISHED, FAILED = "running", "paused", "done", "failed"
STATUSES = (RUNNING, PAUSED, FINISHED, FAILED)
TERMINAL_STATUSES = (FINISHED, FAILED)

Message = dict[str, Any]
"""One Anthropic ``MessageParam``: ``{"role": "user" | "assistant", "content": ...}``."""


@dataclass(frozen=True)
class Checkpoint:
    """One durable snapshot of a run.

    ``cursor`` is the next step to run; ``window`` is the model context exactly as it will be sent next;
    ``seq`` increases by one with every write and is what the monotonic guard compares.
    """

    run_id: str
    seq: int
    version: int
    cursor: str
    status: str
    state: dict[str, Any]
    window: list[Message] = field(default_factory=list)
    cost_usd: float = 0.0
    updated_at: str = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON payload stored in ``checkpoints.data``: what ``dataclasses.asdict`` gives (containers
        copied, a dataclass in the state turned into a dict), built without its generic walk and
        ``deepcopy`` of every leaf (a JSON leaf is immutable)."""
        return {name: _copied(getattr(self, name)) for name in FIELDS}

    def replace(self, **changes: Any) -> Checkpoint:
        return dataclasses.replace(self, **changes)


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Checkpoint))

_LEAVES = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    if isinstance(value, _LEAVES):
        return value
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, tuple):
        return type(value)(*map(_copied, value)) if hasattr(value, "_fields") else tuple(map(_copied, value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return copy.deepcopy(value)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()
