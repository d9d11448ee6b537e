"""Scenarios: a workload, how its faults are generated, which checkers judge it, and what its trials add
up to (pass, fail, unknown, a negative control's expected finding, skipped).

A scenario module in `scenarios/` defines a `Scenario` subclass and registers it under the entry-point
group `killpoint.scenarios`, so the harness never imports `killpoint.scenarios` and a user's package can
add its own. `run` is what `killpoint run` does with it; `replay` and `explore` are shared.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Literal, TypeVar

from killpoint.checkers import CRASH_CHECKERS, CheckerRef
from killpoint.env.stepmodule import DEFAULT_STEPS, AgentSpec, load
from killpoint.errors import UsageError
from killpoint.faults.schedule import Schedule, exhaustive, fault_budget, random_schedules
from killpoint.faults.shard import Shard
from killpoint.faults.shrink import shrink
from killpoint.run.options import RunOptions
from killpoint.run.trial import Session, Setup, Trial, step_points

if TYPE_CHECKING:
    from killpoint.run.checkpoint_store import CheckpointStore

T = TypeVar("T")

ScenarioOutcome = Literal["pass", "fail", "unknown", "expected", "skipped", "error", "interrupted"]
"""`error`: the scenario could not run (its message says why); the run goes on with the others.
`interrupted`: Ctrl-C or SIGTERM stopped it; its trials are those judged before (`killpoint.cli.interrupted`)."""


@dataclass
class Context:
    """What a scenario gets: the session, the base seed, a time budget for random exploration, and a
    way to report progress."""

    session: Session
    seed: int = 0
    budget: float = 60.0
    say: Callable[[str], None] = lambda _msg: None
    random_count: int = 8
    started: float = field(default_factory=time.monotonic)
    previous_steps: str | None = None
    """The agent's previous code (`--previous-steps pkg.module`), for the schema scenarios."""
    explicit: bool = False
    """The user wrote the schedules (`replay --schedule`): a fault that never fires leaves a trial unknown."""
    named: tuple[str, ...] = ()
    """The scenarios the user named (`--scenario`); empty when the whole suite runs."""
    actions: tuple[str, ...] = ()
    """The fault actions the user allowed (`--actions kill,term`); empty: every scenario's own."""
    shard: Shard | None = None
    """`--shard K/N`: only the schedules of this shard run (`faults.shard`); None: all of them."""
    on_trial: Callable[[str, int, int, str], None] | None = None
    """Called after each trial of a plan as (scenario, done, total, outcome): the progress display."""
    checkpoints: CheckpointStore | None = None
    """The checkpoints kept by earlier runs (`run.checkpoint_store`), for `stored-checkpoints`; None: off."""

    def asked(self, name: str) -> bool:
        """True when the user named scenario `name` (not merely ran the whole suite)."""
        return name in self.named

    def over_budget(self) -> bool:
        return time.monotonic() - self.started > self.budget


@dataclass
class ScenarioResult:
    """One scenario's outcome: its trials, the failing ones, and a line of figures."""

    name: str
    outcome: ScenarioOutcome
    trials: list[Trial]
    elapsed: float
    figures: str = ""
    reason: str = ""
    cut: str = ""
    """What a time budget left out, and why (e.g. "random: 3 of 8 schedules, the budget of 60 s ran out"), or ""."""


class Scenario:
    """Base scenario: single faults everywhere, then random multi-fault schedules (crash-points)."""

    name = ""
    summary = ""
    checkers: tuple[CheckerRef, ...] = CRASH_CHECKERS
    actions: tuple[str, ...] = ("kill", "term")
    expected_finding = False
    """A negative control: failing is the expected outcome, reported as a finding, not a failure."""
    steps: str | None = None
    """The scenario's own agent (a step module, e.g. a variant for a negative control), used instead of the
    session's `--steps`; its schedules name that agent's steps."""

    black_box_reason: str | None = None
    """Why this scenario cannot apply to a black-box worker (`--worker-cmd`), or None if it can: such a
    scenario is skipped with this reason, never run to an unknown."""

    left_to_other_shards = 0
    """How many trials of this instance's plans `--shard K/N` left to the other shards (`in_shard`)."""

    budget_cuts: tuple[str, ...] = ()
    """What the time budget cut from this instance's plans (`_run_plan`), said in its result's `cut`."""

    def options(self, base: RunOptions) -> RunOptions:
        return base

    def actions_in(self, ctx: Context) -> tuple[str, ...]:
        """The scenario's fault actions the user allowed (`--actions`; all of them by default)."""
        return tuple(a for a in self.actions if not ctx.actions or a in ctx.actions)

    def setup(self) -> Setup | None:
        return None

    def skip_reason(self, ctx: Context) -> str | None:
        """Why this scenario cannot run in this session (reported as skipped, never as passed), or None."""
        return None

    def figures(self, trials: list[Trial]) -> str:
        """A short line of measurements for the summary (e.g. "drain 0.31s / grace 2.0s"), or ""."""
        return ""

    def finding(self, trial: Trial) -> bool:
        """For a negative control: whether this failing trial is the finding the scenario exists to produce
        (a failure of any other kind fails the scenario)."""
        return True

    def agent(self, ctx: Context) -> AgentSpec:
        """The agent this scenario runs: its own `steps`, or the session's."""
        return load(self.steps) if self.steps else ctx.session.agent

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None, run_id: str | None = None) -> Trial:
        return ctx.session.trial(schedule, explicit=ctx.explicit, prefix=self.name, seed=seed, options=self.options(ctx.session.options),
                                 checkers=self.checkers, setup=self.setup(), agent=self.agent(ctx), run_id=run_id)

    def concurrent(self) -> bool:
        """Whether this scenario's schedules may run at the same time (`-j`): each trial is one run id of its
        own and no fault reaches what runs share. Not with `db-crash` (the server is shared), nor when a
        subclass runs its trials its own way (`trial` overridden); such a subclass may override this."""
        return "db-crash" not in self.actions and type(self).trial is Scenario.trial

    def _run_plan(self, ctx: Context, plan: list[tuple[int | None, Schedule]], line: Callable[[int, int | None,
                  Schedule, Trial], str], stop_on_budget: bool = False) -> list[Trial]:
        """Run `plan` (seed, schedule) in order and say `line(i, seed, schedule, trial)` for each, in plan
        order. When `concurrent()`, up to `ctx.session.jobs` at a time (`run.pool.ordered`), the run ids
        taken in plan order first, so that ids, lines and verdicts are those of `-j 1`; a trial not started
        when the budget is spent is left out."""
        from killpoint.run.pool import ordered

        plan = self.in_shard(ctx, plan, lambda item: (item[1], item[0]))
        trials: list[Trial] = []
        if not self.concurrent():
            for i, (seed, schedule) in enumerate(plan, 1):
                if stop_on_budget and ctx.over_budget():
                    break
                trial = self.trial(ctx, schedule) if seed is None else self.trial(ctx, schedule, seed)
                ctx.say(line(i, seed, schedule, trial))
                if ctx.on_trial is not None:
                    ctx.on_trial(self.name, i, len(plan), trial.outcome)
                trials.append(trial)
            return self._cut(ctx, trials, plan, stop_on_budget)
        ids = [ctx.session.next_run_id(self.name) for _ in plan]

        def task(seed: int | None, schedule: Schedule, run_id: str) -> Trial | None:
            if stop_on_budget and ctx.over_budget():
                return None
            return self.trial(ctx, schedule, seed, run_id=run_id)

        def done(i: int, trial: Trial | None) -> None:
            if trial is not None and len(trials) == i:  # after a budget stop, nothing more is counted
                ctx.say(line(i + 1, plan[i][0], plan[i][1], trial))
                if ctx.on_trial is not None:
                    ctx.on_trial(self.name, i + 1, len(plan), trial.outcome)
                trials.append(trial)

        ordered([lambda s=s, r=r: task(*s, r) for s, r in zip(plan, ids, strict=True)], ctx.session.jobs, done)
        return self._cut(ctx, trials, plan, stop_on_budget)

    def _cut(self, ctx: Context, trials: list[Trial], plan: Sequence[object], stop_on_budget: bool) -> list[Trial]:
        """`trials`; when the budget left part of `plan` out, say so and keep it in `budget_cuts` (only the
        random part of a scenario is ever cut: its exhaustive part depends on the agent alone)."""
        if stop_on_budget and len(trials) < len(plan):
            note = f"random: {len(trials)} of {len(plan)} schedules, the budget of {ctx.budget:g} s ran out"
            self.budget_cuts = (*self.budget_cuts, note)
            ctx.say(f"{self.name}: {note}")
        return trials

    def in_shard(self, ctx: Context, plan: Sequence[T], label: Callable[[T], tuple[Schedule | str, int | None]]) -> list[T]:
        """The items of `plan` this job runs under `--shard K/N` (all of them without it), in plan order.
        One item is one trial, named by `label(item)`: (its schedule, or the scenario's own label for it;
        its seed or None), so whether this shard runs it is `Shard.owns(scenario, label, seed)`, a pure
        function of the name; the items left out are counted in `left_to_other_shards`. A negative control
        is one unit (its finding is judged over all its trials together): one shard runs all of it."""
        if ctx.shard is None:
            return list(plan)
        if self.expected_finding:
            kept = list(plan) if ctx.shard.owns(self.name, "negative-control") else []
        else:
            kept = [item for item in plan if ctx.shard.owns(self.name, *label(item))]
        if len(kept) < len(plan):
            self.left_to_other_shards += len(plan) - len(kept)
            ctx.say(f"{self.name}: shard {ctx.shard} runs {len(kept)} of {len(plan)} trials; the other shards run the rest")
        return kept

    def step_points(self, ctx: Context) -> dict[str, list[str]]:
        return step_points(ctx.session.baseline(self.options(ctx.session.options), self.agent(ctx)))

    def schedule_from_seed(self, ctx: Context, seed: int) -> Schedule:
        """The schedule a seed stands for in this scenario (what `replay --seed` runs)."""
        points = self.step_points(ctx)
        return Schedule.from_seed(seed, points, actions=self.actions_in(ctx), max_faults=fault_budget(points))

    def exhaustive(self, ctx: Context) -> list[Trial]:
        schedules = exhaustive(self.step_points(ctx), self.actions_in(ctx))
        return self._run_plan(ctx, [(None, s) for s in schedules],
                              lambda i, _seed, schedule, trial:
                              f"{self.name}: [{i}/{len(schedules)}] {schedule} -> {trial.outcome}")

    def random_plan(self, ctx: Context, count: int) -> list[tuple[int, Schedule]]:
        """The (seed, schedule) pairs `random` runs; each schedule is `Schedule.from_seed(seed, ...)`, of up
        to `fault_budget` faults (one per step of the agent: a longer agent gets longer schedules)."""
        points = self.step_points(ctx)
        return random_schedules(ctx.seed, count, points, actions=self.actions_in(ctx),
                                max_faults=fault_budget(points))

    def random(self, ctx: Context, count: int, *, stop_on_budget: bool = False) -> list[Trial]:
        plan = self.random_plan(ctx, count)
        return self._run_plan(ctx, list(plan),
                              lambda i, seed, schedule, trial:
                              f"{self.name}: random [{i}/{len(plan)}] seed {seed} {schedule} -> {trial.outcome}",
                              stop_on_budget)

    def run(self, ctx: Context) -> list[Trial]:
        """What `killpoint run` does: every single fault, then random schedules within the budget."""
        return self.exhaustive(ctx) + self.random(ctx, ctx.random_count, stop_on_budget=True)

    shrink_budget = 36
    """Trials all shrinking of one scenario may run (each failure's share is at most 12)."""

    def shrink(self, ctx: Context, failing: Trial, max_tries: int = 12) -> Trial:
        """The fewest faults (`faults.shrink`) for which the same checker still fails; the trial of it, its
        `shrunk_from` naming the failing schedule it came from (the failing trial itself if none is smaller)."""
        return self._shrink(ctx, failing, max_tries)[0]

    def _shrink(self, ctx: Context, failing: Trial, max_tries: int) -> tuple[Trial, int]:
        """`shrink`, and how many trials it ran."""
        checker = failing.failing()[0].checker
        tried: dict[str, Trial] = {}

        def still_fails(candidate: Schedule) -> bool:
            trial = tried[str(candidate)] = self.trial(ctx, candidate)
            return any(v.checker == checker for v in trial.failing())

        best = shrink(failing.schedule, still_fails, max_tries)
        found = tried.get(str(best))
        if found is None:
            return failing, len(tried)
        found.shrunk_from = failing.schedule
        ctx.say(f"{self.name}: shrunk {failing.schedule} ({len(failing.schedule)} faults) to {best} "
                f"({len(best)} fault{'s' if len(best) != 1 else ''}) in {len(tried)} trials")
        return found, len(tried)

    def with_shrunk(self, ctx: Context, trials: list[Trial]) -> list[Trial]:
        """`trials`, plus every failing multi-fault schedule shrunk to the fewest faults that still fail, within
        `shrink_budget` trials in all, each shrunk trial saying what it was shrunk from; two failures that shrink
        to the same schedule add it once (a negative control's findings are not shrunk: they are expected)."""
        if self.expected_finding:
            return trials
        out = list(trials)
        known: set[str] = set()
        spent = 0
        for t in [t for t in trials if t.outcome == "fail" and len(t.schedule) > 1]:
            tries = min(12, self.shrink_budget - spent)
            if tries <= 0:
                ctx.say(f"{self.name}: shrink budget spent; {t.schedule} is shown as found")
                break
            small, ran = self._shrink(ctx, t, tries)
            spent += max(1, ran)
            if small is not t and str(small.schedule) not in known:
                known.add(str(small.schedule))
                out.append(small)
        return out

    # ---- policy: what the trials add up to -----------------------------------------------------------
    def skipped(self, ctx: Context, started: float) -> ScenarioResult | None:
        """The `skipped` result (with its reason) when this scenario cannot run in this session, else None."""
        reason = self.skip_reason(ctx)
        if reason is None and self.black_box_reason and ctx.session.env.black_box:
            reason = f"does not apply to a black-box worker (--worker-cmd): {self.black_box_reason}"
        if reason is None and self.actions and not self.actions_in(ctx):
            reason = f"its faults ({', '.join(self.actions)}) are not among --actions {','.join(ctx.actions)}"
        if reason is None:
            return None
        ctx.say(f"{self.name}: skipped: {reason}")
        return ScenarioResult(self.name, "skipped", [], time.monotonic() - started, reason=reason)

    def result(self, trials: list[Trial], started: float) -> ScenarioResult:
        """The scenario's outcome: fail if a trial failed, unknown if one could not decide (or none ran),
        else pass; a negative control is judged by `negative_control`; skipped when `--shard` left every
        trial to the other shards."""
        if not trials and self.left_to_other_shards:
            return ScenarioResult(self.name, "skipped", [], time.monotonic() - started,
                                  reason=f"--shard: all {self.left_to_other_shards} of its trials run in other shards")
        outcomes = {t.outcome for t in trials}
        outcome: ScenarioOutcome = ("fail" if "fail" in outcomes else
                                    "unknown" if "unknown" in outcomes or not trials else "pass")
        reason = ""
        if self.expected_finding:
            outcome, reason = self.negative_control(trials)
        return ScenarioResult(self.name, outcome, trials, time.monotonic() - started,
                              figures=self.figures(trials), reason=reason, cut="; ".join(self.budget_cuts))

    def negative_control(self, trials: list[Trial]) -> tuple[ScenarioOutcome, str]:
        """A negative control is `expected` when it produced its finding and nothing else failed or stayed
        undecided; when the finding is missing, the harness missed what it exists to catch: a failure."""
        found = [t for t in trials if t.outcome == "fail" and self.finding(t)]
        others = [t for t in trials if t.outcome != "pass" and all(t is not f for f in found)]
        if not found:
            return "fail", "negative control: the expected finding was not produced"
        if others:
            return "fail", f"negative control: {len(others)} trial(s) failed otherwise than by the expected finding"
        return "expected", ""


def registry() -> dict[str, Scenario]:
    """Scenarios registered under the `killpoint.scenarios` entry-point group, by name."""
    out: dict[str, Scenario] = {}
    for ep in entry_points(group="killpoint.scenarios"):
        obj = ep.load()
        scenario = obj() if isinstance(obj, type) else obj
        out[scenario.name or ep.name] = scenario
    return dict(sorted(out.items()))


def find(name: str) -> Scenario:
    """The registered scenario `name`; a misspelt name is refused from the catalog, importing none."""
    from killpoint.run.catalog import entries

    known = entries()
    if name not in known:
        raise UsageError("unknown-scenario", f"no scenario named {name!r}",
                         f"use one of: {', '.join(known) or '(none registered: pip install -e .)'}")
    obj = known[name].entry_point.load()
    return obj() if isinstance(obj, type) else obj


def replay_command(scenario: str, schedule: Schedule | None = None, seed: int | None = None,
                   steps: str = DEFAULT_STEPS, grace: float | None = None, previous_steps: str | None = None,
                   worker_cmd: str | None = None, effects: dict[str, str] | None = None,
                   adapter: str | None = None) -> str:
    """The one line that reproduces a trial (with `--grace` when the trial ran with another grace than
    the default, and `--previous-steps` when it resumed a run of the agent's previous code)."""
    parts = ["killpoint replay", f"--scenario {scenario}"]
    if schedule is not None:
        parts.append(f"--schedule '{schedule}'")
    elif seed is not None:
        parts.append(f"--seed {seed}")
    if steps != DEFAULT_STEPS:
        parts.append(f"--steps {steps}")
    if grace is not None and grace != RunOptions.grace:
        parts.append(f"--grace {grace:g}")
    if previous_steps:
        parts.append(f"--previous-steps {previous_steps}")
    if worker_cmd:
        parts.append(f"--worker-cmd {shlex.quote(worker_cmd)}")
    if adapter and adapter != "checkpoints":
        parts.append(f"--adapter {adapter}")
    for name, url in (effects or {}).items():
        parts.append(f"--effect {shlex.quote(f'{name}={url}')}")
    return " ".join(parts)
