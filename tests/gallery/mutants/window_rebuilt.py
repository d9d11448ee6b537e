"""Mutant: the model window is rebuilt from state on resume instead of taken from the checkpoint. The
resumed step sends the model a context the crash-free run never sent, and gets another answer."""

from __future__ import annotations

import json

from killpoint.reference_agent import runtime
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]

_start_or_resume = runtime._start_or_resume


def _from_state(state: dict) -> list[dict]:
    known = {k: v for k, v in state.items() if v not in (None, [], False)}
    return [{"role": "user", "content": f"Continue the billing task. Known so far: {json.dumps(known)}"},
            {"role": "assistant", "content": "Understood; continuing."}]


def _resume(store: runtime.CheckpointStore, run_id: str, module: runtime.StepModule,
            params: dict | None) -> runtime.Checkpoint:
    cp = _start_or_resume(store, run_id, module, params)
    if cp.window:
        cp = cp.replace(window=_from_state(cp.state))  # BUG: the saved window is ignored, rebuilt from state
    return cp


runtime._start_or_resume = _resume
