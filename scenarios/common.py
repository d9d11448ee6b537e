"""What the scenarios with a fixed plan of trials share: run each, say how it went."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from killpoint.run.scenario import Context
from killpoint.run.trial import Trial

T = TypeVar("T")

WAITING_PER_JOB = 4
"""Trials that spend their time waiting run this many per `-j` job (`-j 2`: 8 at a time; `-j 1`: one)."""


def run_each(ctx: Context, name: str, plan: Sequence[T], one: Callable[[T, str | None], Trial],
             describe: Callable[[T, Trial], str] = lambda item, _t: str(item), *,
             concurrent: bool = False) -> list[Trial]:
    """`one(item, run_id)` for each item of `plan`, with a progress line `name: [i/n] <describe> -> outcome`
    in plan order.

    Without `concurrent`, one after another, `run_id` None (the trial takes the next id itself). With it,
    up to `WAITING_PER_JOB` x `ctx.session.jobs` at a time (`run.pool.ordered`; one at a time under
    `-j 1`): the run ids (`name-N`) are taken in plan order before any trial starts and the lines come out
    in plan order, so ids, lines and verdicts are those of `-j 1`. Only for trials that share nothing but
    the session (each is runs of its own id) and that spend their time waiting (deliberately slow steps),
    not on the cores: that is why more of them than cores run at once, and why they take no slot of the
    session's gate (`run.gate`) beside the scenarios that run at the same time."""
    from killpoint.run.pool import ordered

    trials: list[Trial] = []

    def done(i: int, trial: Trial) -> None:
        ctx.say(f"{name}: [{i + 1}/{len(plan)}] {describe(plan[i], trial)} -> {trial.outcome}")
        trials.append(trial)

    if not concurrent or ctx.session.jobs <= 1:
        for i, item in enumerate(plan):
            done(i, one(item, None))
        return trials
    ids = [ctx.session.next_run_id(name) for _ in plan]
    ordered([lambda item=item, run_id=run_id: one(item, run_id) for item, run_id in zip(plan, ids, strict=True)],
            WAITING_PER_JOB * ctx.session.jobs, done)
    return trials
