"""Running a scenario's plan of trials: which items this shard runs, in what order, how many at a time,
and what a time budget cut.

1. `in_shard(scenario, ctx, plan, label, local=False)`: the items of `plan` this job runs under `--shard
   K/N` (all of them without it), in plan order; one item is one trial, named by `label(item)` (its
   schedule, or the scenario's own label for it; its seed or None). A plan every machine computes alike is
   dealt (`Shard.deal`: each shard its weight's share, within one trial); a `local` plan (what only this
   machine kept: stored failures, kept checkpoints) is split by name (`Shard.owns`). The items left out
   are counted in `scenario.left_to_other_shards`. A negative control (its finding is judged over all its
   trials together) or a `whole` scenario is one unit: one shard runs all of it (`Shard.holder`).
2. `run_plan(scenario, ctx, plan, line, stop_on_budget)`: the shard's items of `plan` (seed, schedule), each
   `scenario.trial`, said as `line(i, seed, schedule, trial)` and counted by `ctx.on_trial`, in plan order;
   where a trial is a function of its schedule (`scenario.judged_once`), not the items judged already
   (`ctx.judged`: the stored failures replayed first), which are said and left out after the deal. When
   `scenario.concurrent()`, as many at a time as the session's gate lets run (`run.gate`: `-j`, shared
   with the scenarios running beside this one; `run.pool.ordered` hands the results back in order), the run
   ids taken in plan order first, so that ids, lines and verdicts are those of `-j 1`. Each trial, concurrent
   or not, holds a slot of the gate while it runs.
3. `weigh_shards(scenarios, ctx)`: the session's shard with its whole units placed (a negative control
   that runs in this session, a `whole` scenario) and the weights that leave the shards holding them less
   of every dealt plan (`Shard.placing`; `cost` is each scenario's estimated seconds, counted only for the
   scenarios this session runs and deals: not a skipped one, not a `local_plan` one); from the selection and
   the session's options alone (never a machine's own stores), so every shard places and weighs alike.
4. With `stop_on_budget`, a trial not started when the budget is spent is left out, and what was cut is
   said and kept in `scenario.budget_cuts` (only the random part of a scenario is ever cut: its exhaustive
   part depends on the agent alone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from killpoint.faults.schedule import Schedule
from killpoint.faults.shard import Shard, trial_name

if TYPE_CHECKING:
    from killpoint.run.context import Context
    from killpoint.run.trial import Trial, Trials

T = TypeVar("T")


class Planned(Protocol):
    """What of a scenario (`run.scenario.Scenario`) its plans need: its name, whether it is a negative
    control, where shards and budget cuts are counted, and how one trial runs."""

    name: str
    expected_finding: bool
    whole: bool
    judged_once: bool
    left_to_other_shards: int
    budget_cuts: tuple[str, ...]

    def concurrent(self) -> bool: ...

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None, run_id: str | None = None) -> Trial: ...


class Weighed(Protocol):
    """What `weigh_shards` reads of a scenario: its name, estimated seconds, whether it is one unit (a
    negative control, or `whole`), whether its plan is this machine's own, and whether it is skipped in this
    session."""

    name: str
    cost: float
    expected_finding: bool
    whole: bool
    local_plan: bool

    def skip_why(self, ctx: Context) -> str | None: ...


Line = Callable[[int, "int | None", Schedule, "Trial"], str]
"""The progress line of the i-th trial of a plan (1-based), from its seed, schedule and judged trial."""


def one_unit(scenario: Planned | Weighed) -> bool:
    """True for a scenario that one shard runs whole: a negative control (its finding must be seen where it
    runs) or one whose plan is one unit (`whole`)."""
    return scenario.expected_finding or scenario.whole


def in_shard(scenario: Planned, ctx: Context, plan: Sequence[T],
             label: Callable[[T], tuple[Schedule | str, int | None]], local: bool = False) -> list[T]:
    """Flow step 1: the items of `plan` this shard runs."""
    if ctx.shard is None:
        return list(plan)
    if one_unit(scenario):
        kept = list(plan) if ctx.shard.holder(scenario.name) == ctx.shard.index else []
    elif local:
        kept = [item for item in plan if ctx.shard.owns(scenario.name, *label(item))]
    else:
        owners = ctx.shard.deal(scenario.name, [trial_name(*label(item)) for item in plan])
        kept = [item for item, owner in zip(plan, owners, strict=True) if owner == ctx.shard.index]
    if len(kept) < len(plan):
        scenario.left_to_other_shards += len(plan) - len(kept)
        ctx.say(f"{scenario.name}: shard {ctx.shard} runs {len(kept)} of {len(plan)} trials; the other shards run "
                "the rest")
    return kept


def weigh_shards(scenarios: Sequence[Weighed], ctx: Context) -> Shard | None:
    """Flow step 3: `ctx.shard` weighed for a session running `scenarios` (None without --shard)."""
    if ctx.shard is None:
        return None
    # a local plan is split by name, not dealt (and only this machine knows if it is empty); a skipped
    # scenario costs no shard anything
    running = [sc for sc in scenarios if not sc.local_plan and sc.skip_why(ctx) is None]
    units = {sc.name: sc.cost for sc in running if one_unit(sc)}
    rest = sum(sc.cost for sc in running if not one_unit(sc))
    return ctx.shard.placing(units, rest)


def run_plan(scenario: Planned, ctx: Context, plan: list[tuple[int | None, Schedule]], line: Line,
             stop_on_budget: bool = False) -> Trials:
    """Flow steps 2 and 4: the trials of the shard's part of `plan`, in plan order."""
    from killpoint.run.pool import ordered
    from killpoint.run.trial import Trials

    plan = in_shard(scenario, ctx, plan, lambda item: (item[1], item[0]))
    if ctx.judged and scenario.judged_once:  # after the deal: every shard deals the same plan
        again = [item for item in plan if str(item[1]) in ctx.judged]
        if again:
            plan = [item for item in plan if str(item[1]) not in ctx.judged]
            named = ", ".join(str(s) for _, s in again[:3]) + (" and more" if len(again) > 3 else "")
            ctx.say(f"{scenario.name}: {len(again)} of this plan's schedules were replayed from the failure store "
                    f"first, not run again: {named}")
    trials = Trials()  # a spooled passing trial is 8 bytes here, not the trial

    def done(i: int, trial: Trial | None) -> None:
        if trial is not None and len(trials) == i:  # after a budget stop, nothing more is counted
            ctx.say(line(i + 1, plan[i][0], plan[i][1], trial))
            if ctx.on_trial is not None:
                ctx.on_trial(scenario.name, i + 1, len(plan), trial.outcome)
            trials.append(trial)

    if not scenario.concurrent():
        for i, (seed, schedule) in enumerate(plan):
            with ctx.slot(scenario.name):
                if stop_on_budget and ctx.over_budget():
                    break
                trial = scenario.trial(ctx, schedule) if seed is None else scenario.trial(ctx, schedule, seed)
            done(i, trial)
        return _cut(scenario, ctx, trials, plan, stop_on_budget)
    ids = [ctx.session.next_run_id(scenario.name) for _ in plan]

    def task(seed: int | None, schedule: Schedule, run_id: str) -> Trial | None:
        with ctx.slot(scenario.name):  # the session's width, shared with the scenarios running beside this one
            if stop_on_budget and ctx.over_budget():
                return None
            return scenario.trial(ctx, schedule, seed, run_id=run_id)

    ordered([lambda s=s, r=r: task(*s, r) for s, r in zip(plan, ids, strict=True)], ctx.session.gate.most, done)
    return _cut(scenario, ctx, trials, plan, stop_on_budget)


def _cut(scenario: Planned, ctx: Context, trials: Trials, plan: Sequence[object],
         stop_on_budget: bool) -> Trials:
    """Flow step 4: `trials`; when the budget left part of `plan` out, say so and keep it in `budget_cuts`."""
    if stop_on_budget and len(trials) < len(plan):
        note = f"random: {len(trials)} of {len(plan)} schedules, the budget of {ctx.budget:g} s ran out"
        scenario.budget_cuts = (*scenario.budget_cuts, note)
        ctx.say(f"{scenario.name}: {note}")
    return trials
