"""Mutant: a step visited more than once whose per-visit key collides: each installment keyed by the day it is charged (two installments on one day share a key). The
invoice is charged in two installments (the loop of tests.corpus.installments), but both passes of `charge`
send the same Idempotency-Key, so the ledger applies the first and replays it for the second: half the amount
is charged, in every run, the crash-free one too."""

from __future__ import annotations

import datetime  # noqa: F401 - the day-keyed mutant reads the date

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.corpus.installments import (
    INSTALLMENTS,
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from tests.corpus.installments import STEPS as _STEPS


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    if "validate" not in s["approvals"]:
        return StepResult("validate")
    n = len(s["paid"]) + 1
    part = s["amount_cents"] // INSTALLMENTS
    key = f"{ctx.idempotency_key}:{datetime.date.today().isoformat()}"  # BUG: the same key on every visit of the step
    receipt = ctx.ledger.charge(s["customer"]["account"], part, s["currency"], key=key)
    paid = [*s["paid"], receipt.get("id")]
    return StepResult("charge" if n < INSTALLMENTS else "email", {"paid": paid, "charge_id": paid[0]})


STEPS = {**_STEPS, "charge": charge}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
