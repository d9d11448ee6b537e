"""non-idempotent-downstream: a negative control. The harness must find the window it is built to find.

The agent is the webhook variant (`killpoint.reference_agent.webhook_agent`): its `notify` step posts to a webhook
that has no idempotency-key support, guarded by the agent's own `was_done` / `mark_done`. That narrows
the window of a duplicate without closing it: a worker that dies after the post and before `mark_done`
posts again when the run resumes. Every single kill over the agent's steps and points is tried; the
trials where `exactly_once` sees the webhook posted twice are the expected finding, each with the line
that replays it. The scenario counts as `expected` when the window is found and nothing else fails, and as a failure
(of the harness: the control did not fire, or of something else) otherwise.
"""

from __future__ import annotations

from killpoint.env.stepmodule import DEFAULT_STEPS
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial

WEBHOOK_AGENT = "killpoint.reference_agent.webhook_agent"


def is_webhook_duplicate(trial: Trial) -> bool:
    """The expected finding: `exactly_once` fails because the webhook was posted more than once, and it
    is the only thing that failed."""
    failing = trial.failing()
    if [v.checker for v in failing] != ["exactly_once"]:
        return False
    lines = failing[0].evidence
    return bool(lines) and all(line.startswith("extra") and " webhook " in line for line in lines)


class NonIdempotentDownstream(Scenario):
    name = "non-idempotent-downstream"
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 9.6  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = ("killpoint self-check (its own webhook agent, not yours): a negative control; the harness must find "
               "the duplicate window")
    expected_finding = True
    steps = WEBHOOK_AGENT
    actions = ("kill",)
    """A SIGTERM lets the step finish, `mark_done` included: only a kill can land inside the window."""
    black_box_reason = "a self-check of killpoint on its own webhook agent, which a --worker-cmd replaces"

    def skip_reason(self, ctx: Context) -> str | None:
        """A check of killpoint itself, on its own webhook agent: not run on a user's agent unless asked."""
        if ctx.session.agent.module != DEFAULT_STEPS and not ctx.asked(self.name):
            return ("a self-check of killpoint on its own webhook agent, not on yours; "
                    f"run it with --scenario {self.name}")
        return None

    def run(self, ctx: Context) -> list[Trial]:
        """Every single fault; random schedules would only find the same window again."""
        return self.exhaustive(ctx)

    def finding(self, trial: Trial) -> bool:
        return is_webhook_duplicate(trial)

    def figures(self, trials: list[Trial]) -> str:
        found = [t for t in trials if t.outcome == "fail" and self.finding(t)]
        if not found:
            return "window NOT found"
        return f"window found by {len(found)} of {len(trials)} faults: {', '.join(str(t.schedule) for t in found)}"
