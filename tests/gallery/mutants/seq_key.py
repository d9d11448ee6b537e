"""Mutant: the idempotency key is built from seq, in a runtime that writes a checkpoint when it claims a run.

The claim write alone is harmless; it makes seq move between two attempts of the same step, so a key built
from seq differs on replay and the service applies the effect again (the articles: "keyed on the cursor, not
on the sequence number").
"""

from __future__ import annotations

import dataclasses

from killpoint.reference_agent import runtime
from killpoint.reference_agent.context import Resources
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

_context = Resources.context
_start_or_resume = runtime._start_or_resume


def _seq_keyed(self: Resources, run_id: str, cursor: str, seq: int, point: runtime.Point) -> runtime.StepContext:
    ctx = _context(self, run_id, cursor, seq, point)
    return dataclasses.replace(ctx, idempotency_key=f"{run_id}:{seq}")  # BUG: keyed on seq, not on the cursor


def _claim(store: runtime.CheckpointStore, run_id: str, module: runtime.StepModule,
           params: dict | None) -> runtime.Checkpoint:
    cp = _start_or_resume(store, run_id, module, params)
    claimed = cp.replace(seq=cp.seq + 1, updated_at=runtime.now_iso())  # the claim checkpoint: seq moves on
    store.save(claimed)
    return claimed


Resources.context = _seq_keyed  # type: ignore[method-assign]
runtime._start_or_resume = _claim
