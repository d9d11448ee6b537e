"""Mutant: a later pass of a loop does an effect the first pass does not, unprotected (other step names,
model calls, a webhook). `review` runs three passes (tests.corpus.model_loop), asking the model for one more
opinion each time and mailing it to the approver under the key `<run>:opinion:<pass>` (correct); from the
second pass on it also posts the change to the approvals webhook, which takes no idempotency key, so a kill
after the post and before the pass's checkpoint posts it again. Faults in the first pass, or between passes,
never show it: only a fault inside a later visit of `review` (`@2`, `@3`)."""

from __future__ import annotations

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.corpus.model_loop import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, initial_state
from tests.corpus.model_loop import STEPS as _STEPS

APPROVER = "approvals@example.com"


def review(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = _STEPS["review"](cp, ctx)
    opinions = result.state["opinions"]
    about = {"invoice_id": cp.state["invoice_id"], "pass": len(opinions), "opinion": opinions[-1]}
    ctx.mailer.send(APPROVER, "opinion", about, key=f"{ctx.idempotency_key}:{len(opinions)}")
    if len(opinions) > 1:
        ctx.webhook.post("invoice.opinion", about)  # BUG: no key, posted again when the pass is redone
    return result


STEPS = {**_STEPS, "review": review}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
