"""Corpus: a worker that retries on its own with the same key. The charge and the email each wrap their
client in a retry loop of their own (on a 5xx, a reset, a timeout: up to five tries), always with the
step's key. Correct: every retry is deduplicated or applies the one effect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.clients import ServiceUnavailable
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

TRIES = 5


def again(send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`send()`, tried again on a transient failure, up to TRIES times (the last failure raised)."""
    for attempt in range(1, TRIES + 1):
        try:
            return send()
        except (ServiceUnavailable, httpx2.TransportError):
            if attempt == TRIES:
                raise
    raise AssertionError("unreachable")


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    s = cp.state
    if "validate" not in s["approvals"]:
        return StepResult("validate")
    receipt = again(lambda: ctx.ledger.charge(s["customer"]["account"], s["amount_cents"], s["currency"],
                                              key=ctx.idempotency_key))
    return StepResult("email", {"charge_id": receipt.get("id")})


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return again(lambda: _STEPS["email"](cp, ctx))  # type: ignore[arg-type, return-value]


STEPS = {**_STEPS, "charge": charge, "email": email}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
