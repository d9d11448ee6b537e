"""Mutant: cost added again on replay. Each model call's cost is appended to a usage table the moment it is
spent, and the checkpoint's ``cost_usd`` is the sum of that table: a step replayed after a crash is billed
for the attempt that died as well as for the one that counted."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg

from killpoint.reference_agent.checkpoint import Checkpoint
from killpoint.reference_agent.clients import ModelClient, ModelReply
from killpoint.reference_agent.context import Resources, StepContext
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from killpoint.reference_agent.store import CheckpointStore

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

USAGE = "CREATE TABLE IF NOT EXISTS mutant_usage (run_id text NOT NULL, cost_usd double precision NOT NULL)"


class _Metered:
    """The model client, writing each call's cost to the usage table as it is spent."""

    def __init__(self, model: ModelClient, conn: psycopg.Connection, run_id: str) -> None:
        self._model, self._conn, self._run_id = model, conn, run_id

    def ask(self, window: list[dict]) -> ModelReply:
        reply = self._model.ask(window)
        self._conn.execute(USAGE)
        self._conn.execute("INSERT INTO mutant_usage VALUES (%s, %s)", (self._run_id, reply.cost_usd))
        return reply


_context = Resources.context
_save = CheckpointStore.save


def _metered(self: Resources, run_id: str, *args: Any, **kwargs: Any) -> StepContext:
    ctx = _context(self, run_id, *args, **kwargs)
    return dataclasses.replace(ctx, model=_Metered(ctx.model, self.conn, run_id))


def _save_total(self: CheckpointStore, cp: Checkpoint, *args: Any, **kwargs: Any) -> None:
    self.conn.execute(USAGE)
    row = self.conn.execute("SELECT coalesce(sum(cost_usd), 0) FROM mutant_usage WHERE run_id = %s",
                            (cp.run_id,)).fetchone()
    # BUG: the cost is every call ever made for the run, including those of attempts that died and were replayed
    _save(self, cp.replace(cost_usd=round(float(row[0]) if row else 0.0, 9)), *args, **kwargs)


Resources.context = _metered  # type: ignore[method-assign]
CheckpointStore.save = _save_total  # type: ignore[method-assign]
