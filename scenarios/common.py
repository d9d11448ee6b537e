"""What the scenarios with a fixed plan of trials share: run each, say how it went."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from killpoint.run.scenario import Context
from killpoint.run.trial import Trial

T = TypeVar("T")


def run_each(ctx: Context, name: str, plan: Sequence[T], one: Callable[[T], Trial],
             describe: Callable[[T, Trial], str] = lambda item, _t: str(item)) -> list[Trial]:
    """`one(item)` for each item of `plan`, in order, with a progress line `name: [i/n] <describe> -> outcome`."""
    trials = []
    for i, item in enumerate(plan, 1):
        trial = one(item)
        ctx.say(f"{name}: [{i}/{len(plan)}] {describe(item, trial)} -> {trial.outcome}")
        trials.append(trial)
    return trials
