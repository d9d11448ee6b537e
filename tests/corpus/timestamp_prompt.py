"""Corpus: a prompt with the current time in it. The plan prompt names the moment it is asked (ISO 8601,
to the microsecond), so a replayed step asks in another instant. Correct: the request is the same request,
its cost counted once.

The model fake answers a function of the request, so another instant gets another answer (as a real model
may): what the answers steer differs from run to run by design. killpoint finds most of it by itself (the
plan and validation texts, the email's reference, the later prompts that carry the plan: they differ between
its two crash-free runs); what differs only sometimes (the verdict, and with it the email's template: the two
crash-free runs may agree by chance) is declared in NONDETERMINISTIC, as is when the plan was made."""

from __future__ import annotations

import datetime

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    _describe,
    initial_state,
)
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

NONDETERMINISTIC = ("state.planned_at", "state.verdict", "effect.mailer.template")


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    now = datetime.datetime.now(datetime.UTC).isoformat()
    window = [{"role": "user", "content": f"It is {now}. Plan the billing of {_describe(cp.state)}: charge it, "
                                          "email the invoice, record it. Answer with a short plan."}]
    reply = ctx.model.ask(window)
    return StepResult("validate", {"plan": reply.text, "planned_at": now}, [*window, reply.message], reply.cost_usd)


STEPS = {**_STEPS, "plan": plan}

__all__ = ["MIGRATIONS", "NONDETERMINISTIC", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
