"""Mutant: a step visited more than once whose per-visit key collides: each installment keyed by its amount (equal installments share a key).
The invoice is charged in two installments (the loop of tests.corpus.installments), but both passes of
`charge` send the same Idempotency-Key, so the ledger applies the first and replays it for the second: half
the amount is charged, in every run, the crash-free one too."""

from __future__ import annotations

from killpoint.reference_agent import StepContext
from tests.corpus.installments import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    charging,
    initial_state,
)
from tests.corpus.installments import STEPS as _STEPS


def key(ctx: StepContext, n: int, part: int) -> str:
    return f"{ctx.idempotency_key}:{part}"  # BUG: the same key on every visit of the step


STEPS = {**_STEPS, "charge": charging(key)}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
