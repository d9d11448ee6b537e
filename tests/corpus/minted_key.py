"""Corpus: a random key, minted once and checkpointed before use. `mint` draws a uuid4 for the charge and
saves it in the state; `charge` sends it. A replay of `charge` reads the same key from its checkpoint, so
the key is random per run yet stable across replays. Correct: a random key is a bug only if redrawn."""

from __future__ import annotations

import dataclasses
import uuid

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

NONDETERMINISTIC = ("state.charge_key",)


def validate(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = _STEPS["validate"](cp, ctx)
    return dataclasses.replace(result, cursor="mint") if result.cursor == "charge" else result


def mint(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("charge", {"charge_key": str(uuid.uuid4())})


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return _STEPS["charge"](cp, dataclasses.replace(ctx, idempotency_key=cp.state["charge_key"]))


STEPS = {**_STEPS, "validate": validate, "mint": mint, "charge": charge}

__all__ = ["MIGRATIONS", "NONDETERMINISTIC", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
