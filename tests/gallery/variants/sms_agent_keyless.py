"""Deliberately broken: `sms_agent` sending its text with no idempotency key, so a step resumed after the
SMS API applied the text (`notify:effect.applied:kill`) sends it again. exactly_once finds it through the
recording proxy, by the payload's digest."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.variants.sms_agent import START, STATE_VERSION, initial_state, plan, send


def notify(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return StepResult("done", {"sms_id": send(cp, None)["id"]})  # BUG: no key


STEPS = {"plan": plan, "notify": notify}

__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
