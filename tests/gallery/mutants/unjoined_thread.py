"""Mutant: the email is sent from a thread the step does not join. The step returns at once and its checkpoint
commits as if the mail were sent; normally the thread finishes long before the worker moves on, so no single
fault shows it. When the mailer answers 5xx and the client backs off, a kill that follows finds the mail still
unsent, and no later incarnation sends it: the effect is lost. Only a schedule that mixes a service fault with
a process fault finds it."""

from __future__ import annotations

import copy
import dataclasses
import threading

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.clients import RetryPolicy
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


BACKGROUND_BACKOFF_SECONDS = 2.0
"""The background sender backs off for seconds after a 5xx, as real mail clients do: far longer than the
worker takes to checkpoint this step and reach the next one, so a kill there always finds the mail unsent."""


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    mailer = copy.copy(ctx.mailer)
    mailer.retry = RetryPolicy(attempts=mailer.retry.attempts, backoff_seconds=BACKGROUND_BACKOFF_SECONDS)
    background = dataclasses.replace(ctx, mailer=mailer)
    threading.Thread(target=invoice_agent.email, args=(cp, background), daemon=True).start()  # BUG: never joined
    return StepResult("record", {})


STEPS = {**invoice_agent.STEPS, "email": email}
