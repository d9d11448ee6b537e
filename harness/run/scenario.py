"""Scenarios: a workload, how its faults are generated, and which checkers judge it.

A scenario module in `scenarios/` defines a `Scenario` subclass and registers it under the entry-point
group `killpoint.scenarios`, so `harness` never imports `scenarios` and a user's package can add its
own. `run` is what `killpoint run` does with it; `replay` and `explore` are shared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Literal

from killpoint.checkers import CRASH_CHECKERS
from killpoint.errors import UsageError
from killpoint.run.options import RunOptions
from killpoint.faults.schedule import Fault, Schedule, exhaustive, random_schedules
from killpoint.env.stepmodule import DEFAULT_STEPS, AgentSpec, load
from killpoint.run.trial import Session, Setup, Trial, step_points

ScenarioOutcome = Literal["pass", "fail", "unknown", "expected", "skipped"]


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

    def failures(self) -> list[Trial]:
        return [t for t in self.trials if t.outcome == "fail"]


class Scenario:
    """Base scenario: single faults everywhere, then random multi-fault schedules (crash-points)."""

    name = ""
    summary = ""
    checkers: tuple[str, ...] = CRASH_CHECKERS
    actions: tuple[str, ...] = ("kill", "term")
    expected_finding = False
    """A negative control: failing is the expected outcome, reported as a finding, not a failure."""
    steps: str | None = None
    """The scenario's own agent (a step module, e.g. a variant for a negative control), used instead of the
    session's `--steps`; its schedules name that agent's steps."""

    def options(self, base: RunOptions) -> RunOptions:
        return base

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

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        return ctx.session.trial(schedule, prefix=self.name, seed=seed, options=self.options(ctx.session.options),
                                 checkers=self.checkers, setup=self.setup(), agent=self.agent(ctx))

    def step_points(self, ctx: Context) -> dict[str, list[str]]:
        return step_points(ctx.session.baseline(self.options(ctx.session.options), self.agent(ctx)))

    def schedule_from_seed(self, ctx: Context, seed: int) -> Schedule:
        """The schedule a seed stands for in this scenario (what `replay --seed` runs)."""
        return Schedule.from_seed(seed, self.step_points(ctx), actions=self.actions)

    def exhaustive(self, ctx: Context) -> list[Trial]:
        trials = []
        schedules = exhaustive(self.step_points(ctx), self.actions)
        for i, schedule in enumerate(schedules, 1):
            trial = self.trial(ctx, schedule)
            ctx.say(f"{self.name}: [{i}/{len(schedules)}] {schedule} -> {trial.outcome}")
            trials.append(trial)
        return trials

    def random_plan(self, ctx: Context, count: int) -> list[tuple[int, Schedule]]:
        """The (seed, schedule) pairs `random` runs; each schedule is `Schedule.from_seed(seed, ...)`."""
        return random_schedules(ctx.seed, count, self.step_points(ctx), actions=self.actions)

    def random(self, ctx: Context, count: int, *, stop_on_budget: bool = False) -> list[Trial]:
        trials = []
        plan = self.random_plan(ctx, count)
        for i, (seed, schedule) in enumerate(plan, 1):
            if stop_on_budget and ctx.over_budget():
                break
            trial = self.trial(ctx, schedule, seed)
            ctx.say(f"{self.name}: random [{i}/{len(plan)}] seed {seed} {schedule} -> {trial.outcome}")
            trials.append(trial)
        return trials

    def run(self, ctx: Context) -> list[Trial]:
        """What `killpoint run` does: every single fault, then random schedules within the budget."""
        return self.exhaustive(ctx) + self.random(ctx, ctx.random_count, stop_on_budget=True)

    def shrink(self, ctx: Context, failing: Trial, max_tries: int = 12) -> Trial:
        """Greedily drop faults while the same checker still fails: the fewest faults that break it."""
        checker = failing.failing()[0].checker
        best = failing
        tries = 0
        changed = True
        while changed and len(best.schedule) > 1 and tries < max_tries:
            changed = False
            for i in range(len(best.schedule)):
                faults = best.schedule.faults[:i] + best.schedule.faults[i + 1:]
                candidate = Schedule(tuple(_renumber(faults)))
                tries += 1
                trial = self.trial(ctx, candidate)
                if any(v.checker == checker for v in trial.failing()):
                    best, changed = trial, True
                    break
        return best


def _renumber(faults: tuple[Fault, ...]) -> list[Fault]:
    """After dropping faults, an @N with fewer earlier faults on its (step, point) moves down to match."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for f in faults:
        n = seen.get((f.step, f.point), 0) + 1
        seen[(f.step, f.point)] = n
        out.append(Fault(f.step, f.point, f.action, min(f.nth, n)))
    return out


def registry() -> dict[str, Scenario]:
    """Scenarios registered under the `killpoint.scenarios` entry-point group, by name."""
    out: dict[str, Scenario] = {}
    for ep in entry_points(group="killpoint.scenarios"):
        obj = ep.load()
        scenario = obj() if isinstance(obj, type) else obj
        out[scenario.name or ep.name] = scenario
    return dict(sorted(out.items()))


def find(name: str) -> Scenario:
    known = registry()
    if name not in known:
        raise UsageError("unknown-scenario", f"no scenario named {name!r}",
                         f"use one of: {', '.join(known) or '(none registered: pip install -e .)'}")
    return known[name]


def replay_command(scenario: str, schedule: Schedule | None = None, seed: int | None = None,
                   steps: str = DEFAULT_STEPS, grace: float | None = None, previous_steps: str | None = None) -> str:
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
    return " ".join(parts)
