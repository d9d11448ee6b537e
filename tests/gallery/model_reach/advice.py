"""A helper module: asks the model for a plan through the context it is given."""

from __future__ import annotations

from typing import Any


def ask_plan(ctx: Any, subject: str) -> tuple[str, float]:
    reply = ctx.model.ask([{"role": "user", "content": f"Plan {subject} in one line."}])
    return reply.text, reply.cost_usd
