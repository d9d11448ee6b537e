"""Mutant: the email is sent from a thread the step does not join. The step waits only for the mailer's first
answer, whatever it is, and returns; its checkpoint commits as if the mail were sent. Normally that answer is
the mail sent, so no process fault shows it. When the mailer answers 5xx, the thread backs off and retries on
its own: a kill that follows, or the worker's own exit at the end of the run, finds the mail still unsent,
and no later incarnation sends it: the effect is lost. Only a service fault on the email finds it.

(Waiting for the first answer keeps the send inside the email step as the harness sees it: a thread that
was not waited for at all reached the mailer before or after the worker's next `step.start`, as the
scheduler had it, so the crash-free run named the send's step at random.)"""

from __future__ import annotations

import copy
import dataclasses
import threading
from typing import Any

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.clients import RetryPolicy
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


BACKGROUND_BACKOFF_SECONDS = 2.0
"""The background sender backs off for seconds after a 5xx, as real mail clients do: far longer than the
worker takes to checkpoint this step and reach the next one, so a kill there always finds the mail unsent."""


FIRST_ANSWER_SECONDS = 60.0
"""How long the step waits for the mailer's first answer (held at a kill point, the worker is killed first)."""


class _FirstAnswer:
    """The mailer's HTTP client, which sets `answered` once its first POST has returned or raised."""

    def __init__(self, http: Any, answered: threading.Event) -> None:
        self._http = http
        self._answered = answered

    def post(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._http.post(*args, **kwargs)
        finally:
            self._answered.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._http, name)


def email(cp: Checkpoint, ctx: StepContext) -> StepResult:
    answered = threading.Event()
    mailer = copy.copy(ctx.mailer)
    mailer.retry = RetryPolicy(attempts=mailer.retry.attempts, backoff_seconds=BACKGROUND_BACKOFF_SECONDS)
    mailer.http = _FirstAnswer(mailer.http, answered)
    background = dataclasses.replace(ctx, mailer=mailer)
    threading.Thread(target=invoice_agent.email, args=(cp, background), daemon=True).start()  # BUG: never joined
    answered.wait(FIRST_ANSWER_SECONDS)
    return StepResult("record", {})


STEPS = {**invoice_agent.STEPS, "email": email}
