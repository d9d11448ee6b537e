"""Mutant: the checkpoint is written before the effect. A step's service calls are queued and sent only
after the step's checkpoint has committed, so a crash between the two moves the run on past an effect that
never happened."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from killpoint.reference_agent.context import Resources, StepContext
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from killpoint.reference_agent.store import CheckpointStore

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

_pending: list[Callable[[], Any]] = []


class _Later:
    """A service client whose calls are queued, answered with an empty receipt, and sent after the save."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., dict]:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> dict:
            _pending.append(lambda: method(*args, **kwargs))
            return {}

        return call


_context = Resources.context
_save = CheckpointStore.save


def _deferred(self: Resources, *args: Any, **kwargs: Any) -> StepContext:
    ctx = _context(self, *args, **kwargs)
    return dataclasses.replace(ctx, mailer=_Later(ctx.mailer), ledger=_Later(ctx.ledger),
                               webhook=_Later(ctx.webhook))


def _save_then_effects(self: CheckpointStore, *args: Any, **kwargs: Any) -> None:
    _save(self, *args, **kwargs)  # BUG: the checkpoint commits first...
    while _pending:
        _pending.pop(0)()  # ...and the step's effects happen after it


Resources.context = _deferred  # type: ignore[method-assign]
CheckpointStore.save = _save_then_effects  # type: ignore[method-assign]
