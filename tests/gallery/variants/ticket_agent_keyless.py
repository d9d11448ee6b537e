"""Deliberately broken: `ticket_agent` opening its ticket with no idempotency key, so a step resumed after
the ticket API applied it (`open:effect.applied:kill`) opens a second ticket. With the ids declared
(`--effect tickets=URL,id=ticket.id`) exactly_once finds it."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.variants.ticket_agent import START, STATE_VERSION, initial_state, open_ticket, plan, text


def open_(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return open_ticket(cp, None)  # BUG: no key


STEPS = {"plan": plan, "open": open_, "text": text}

__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
