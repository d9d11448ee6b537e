"""Scenarios: a workload, how its faults are generated, which checkers judge it, and what its trials add
up to (pass, fail, unknown, a negative control's expected finding, skipped).

A scenario module in `scenarios/` defines a `Scenario` subclass and registers it under the entry-point
group `killpoint.scenarios`, so the harness never imports `killpoint.scenarios` and a user's package can
add its own. `run` is what `killpoint run` does with it; `replay` and `explore` are shared. A scenario gets a
`Context` (`run.context`); how its plans run is `run.plans`, how its failures shrink `run.shrinking`.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Literal

from killpoint.checkers import CRASH_CHECKERS, CheckerRef
from killpoint.checkers.evidence import MODEL_SERVICES, service_attempts
from killpoint.env.stepmodule import DEFAULT_STEPS, AgentSpec, load
from killpoint.faults.points import base
from killpoint.faults.schedule import (
    MAX_OCCURRENCES,
    Schedule,
    derive_seed,
    distinct,
    exhaustive,
    fault_budget,
)
from killpoint.run.context import Context
from killpoint.run.options import RunOptions
from killpoint.run.plans import run_plan
from killpoint.run.trial import Setup, Trial, TrialSpec, point_occurrences, step_points

ScenarioOutcome = Literal["pass", "fail", "unknown", "expected", "skipped", "error", "interrupted"]
"""`error`: the scenario could not run (its message says why); the run goes on with the others.
`interrupted`: Ctrl-C or SIGTERM stopped it; its trials are those judged before (`killpoint.cli.interrupted`)."""

OTHER_SHARDS = "--shard:"
"""How the reason of a scenario skipped because `--shard` left all its trials to other shards begins (what
`killpoint.cli.selection` tells apart from other skips)."""


NEEDED = {"service": "a service", "model": "the model"}
"""`Scenario.needs` in words."""


@dataclass
class ScenarioResult:
    """One scenario's outcome: its trials, the failing ones, and a line of figures."""

    name: str
    outcome: ScenarioOutcome
    trials: Sequence[Trial]
    """In order; a list, or `Trials` (which holds a spooled passing trial as its place in the spool)."""
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

    needs: tuple[str, ...] = ()
    """What this scenario's faults act on, any of "service" (a request to a fake service) and "model" (a model
    request); empty: the agent's process and checkpoints, which every agent has. An agent whose crash-free run
    made none of them gives the scenario nothing to act on: it is skipped, saying so (`inapplicable`), never
    passed on trials that could not show what it exists for, and never unknown (nothing was left undecided)."""

    judged_once = True
    """Whether a trial of this scenario is a function of its schedule alone (`trial(ctx, schedule, seed)`, the
    seed a label): then its random plan draws each schedule once (`faults.schedule.distinct`) and shrinking
    reuses the verdict of a schedule the scenario judged already. False where the seed or the plan item
    varies a trial beyond its schedule (an interleaving, a kind of checkpoint, a grace)."""

    local_plan = False
    """Whether the scenario's plan is what this machine kept (stored checkpoints): `--shard` splits it by the
    trials' names, and weighs no shard by it (another machine's store may hold none)."""
    whole = False
    """Whether the scenario's plan is one trial whatever the agent (a fleet, a set of concurrent runs):
    `--shard` places it whole on one shard with the negative controls, and deals the rest around them."""

    side_by_side = False
    """Whether `killpoint run` may run this scenario beside other such scenarios (when more than one trial may
    run at once: `-j` above 1, or not given on more than one core), the session's width shared between them
    (`run.gate`). Only for a scenario whose runs touch nothing another scenario's runs read: each trial is
    runs of its own ids, its faults reach only them (no server they share is killed, no sweeper takes
    another's stalled run, no table is read or changed as a whole). False (the default, and what a scenario
    of one's own gets unless it says so): it runs alone, before the side-by-side ones."""

    cost = 2.0
    """Estimated seconds of the whole scenario on the reference agent at -j 1 (measured with bench/shards.py):
    only what `--shard` weighs its shares by (`run.plans.weigh_shards`), never a limit."""

    left_to_other_shards = 0
    """How many trials of this instance's plans `--shard K/N` left to the other shards (`run.plans.in_shard`)."""

    budget_cuts: tuple[str, ...] = ()
    """What the time budget cut from this instance's plans (`run.plans.run_plan`), and what its random plan
    could not find (fewer different schedules than asked: `random`), said in its result's `cut`."""

    untested = ""
    """Why this instance had no schedule to run (`testable`), said as its result's reason; "" if it had."""
    noted = False
    """Whether `step_points` looked for late checkpoints (`run.untested.late_checkpoint`) already."""

    def options(self, base: RunOptions) -> RunOptions:
        return base

    def actions_in(self, ctx: Context) -> tuple[str, ...]:
        """The scenario's fault actions the user allowed (`--actions`; all of them by default)."""
        return tuple(a for a in self.actions if not ctx.actions or a in ctx.actions)

    concrete: tuple[str, ...] = ()
    """The actions as a sweep writes them, where `actions` names some by their base (`clock`, whose jump
    needs its amount: `clock-1h`); empty: `actions` as they are."""

    def sweep_actions(self, ctx: Context) -> tuple[str, ...]:
        """The allowed actions as the exhaustive sweep (and the base random plan) injects them (`concrete`)."""
        allowed = self.actions_in(ctx)
        return tuple(a for a in self.concrete if base(a) in allowed) if self.concrete else allowed

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
        spec = TrialSpec(self.options(ctx.session.options), self.checkers, self.setup(), self.agent(ctx),
                         spool=self.spools())
        return ctx.session.trial(schedule, spec, prefix=self.name, seed=seed, explicit=ctx.explicit, run_id=run_id)

    def spools(self) -> bool:
        """Whether a passing trial may leave memory once judged (`TrialSpec.spool`): only when nothing of the
        scenario reads its evidence after (neither its figures nor a trial method of its own)."""
        return type(self).figures is Scenario.figures and type(self).trial is Scenario.trial

    def concurrent(self) -> bool:
        """Whether this scenario's schedules may run at the same time (`-j`): each trial is one run id of its
        own and no fault reaches what runs share. Not with `db-crash` (the server is shared), nor when a
        subclass runs its trials its own way (`trial` overridden); such a subclass may override this."""
        return "db-crash" not in self.actions and type(self).trial is Scenario.trial

    def step_points(self, ctx: Context) -> dict[str, list[str]]:
        """The points each step reached in the crash-free run; the first time, a note when a step sent a
        request before its checkpoint was committed (`run.untested.late_checkpoint`)."""
        base = ctx.session.baseline(self.options(ctx.session.options), self.agent(ctx))
        if not self.noted:
            from killpoint.run.untested import late_checkpoint

            self.noted = True
            note = late_checkpoint(base, ctx.session.env.adapter)
            if note:
                ctx.say(f"{self.name}: {note}")
        return step_points(base)

    def occurrences(self, ctx: Context) -> dict[str, dict[str, int]]:
        """The points a step reached more than once in the crash-free run, and how often (a loop's later
        passes): the exhaustive sweep faults each occurrence (`faults.schedule.exhaustive`)."""
        return point_occurrences(ctx.session.baseline(self.options(ctx.session.options), self.agent(ctx)))

    def seed_schedules(self, ctx: Context) -> Callable[[int], Schedule]:
        """What each seed stands for in this scenario, the agent's points read once: `schedule_from_seed` (what
        `replay --seed` runs) and `random_plan` both draw through it, so a seed a plan ran replays as its
        schedule. Here `Schedule.from_seed` of up to `fault_budget` faults (one per step of the agent)."""
        points, actions, occurrences = self.step_points(ctx), self.sweep_actions(ctx), self.occurrences(ctx)
        budget = fault_budget(points)
        return lambda seed: Schedule.from_seed(seed, points, actions=actions, max_faults=budget,
                                               occurrences=occurrences)

    def schedule_from_seed(self, ctx: Context, seed: int) -> Schedule:
        """The schedule a seed stands for in this scenario (what `replay --seed` runs)."""
        return self.seed_schedules(ctx)(seed)

    def testable(self, ctx: Context, points: dict[str, list[str]]) -> bool:
        """Whether `points` (this scenario's `step_points`) hold a fault point; if not, `untested` says why
        (`run.untested`) and no schedule is run: a scenario with nothing to test is unknown, never a pass."""
        if any(points.values()):
            return True
        if not self.untested:
            from killpoint.run.untested import nothing_to_test

            base = ctx.session.baseline(self.options(ctx.session.options), self.agent(ctx))
            own = tuple(dict.fromkeys(p for ps in points.values() for p in ps))
            self.untested = nothing_to_test(base, ctx.session.env.adapter, own)
            ctx.say(f"{self.name}: {self.untested}")
        return False

    def sweep_plan(self, ctx: Context) -> list[Schedule]:
        """The exhaustive sweep's schedules, every single fault (`faults.schedule.exhaustive`); none where the
        crash-free run reached no fault point."""
        points = self.step_points(ctx)
        if not any(points.values()):
            return []
        return exhaustive(points, self.sweep_actions(ctx), self.occurrences(ctx))

    def exhaustive(self, ctx: Context) -> list[Trial]:
        points = self.step_points(ctx)
        if not self.testable(ctx, points):
            return []
        occurrences = self.occurrences(ctx)
        capped = [f"{step}:{point} ({n} times)" for step, counts in occurrences.items()
                  for point, n in counts.items() if n > MAX_OCCURRENCES and point in points.get(step, ())]
        if capped:
            ctx.say(f"{self.name}: the sweep faults the first {MAX_OCCURRENCES} times a step reaches a point; "
                    f"later ones are not swept: {', '.join(capped[:3])}{' and more' if len(capped) > 3 else ''}")
        schedules = self.sweep_plan(ctx)
        return run_plan(self, ctx, [(None, s) for s in schedules],
                              lambda i, _seed, schedule, trial:
                              f"{self.name}: [{i}/{len(schedules)}] {schedule} -> {trial.outcome}")

    def random_plan(self, ctx: Context, count: int, besides: Collection[Schedule] = ()) -> list[tuple[int, Schedule]]:
        """The (seed, schedule) pairs `random` runs, each seed's schedule its `seed_schedules`' (a longer agent
        gets longer schedules), each differing from the others and from `besides` (`faults.schedule.distinct`:
        a trial here is a function of its schedule, so a repeat tests nothing new)."""
        if not self.testable(ctx, self.step_points(ctx)):
            return []  # a schedule of no fault tests nothing
        draw = self.seed_schedules(ctx)
        if not self.judged_once:  # each seed is a trial of its own: repeats and all
            return [(seed, draw(seed)) for seed in (derive_seed(ctx.seed, i) for i in range(count))]
        return distinct(ctx.seed, count, draw, besides=besides)

    def random(self, ctx: Context, count: int, *, stop_on_budget: bool = False,
               besides: Collection[Schedule] = ()) -> list[Trial]:
        """`count` random schedules' trials (`random_plan`; none of `besides`, the schedules the session ran
        already); where the agent's fault points give fewer that differ, the ones there are, and a line that
        says so."""
        plan = self.random_plan(ctx, count, besides)
        if 0 < count and len(plan) < count and not self.untested:
            # kept with the budget's cuts: the summary line, verdicts.json and JUnit say what the plan left out
            note = (f"random: {len(plan)} of {count} schedules: the agent's fault points give no more that differ "
                    f"from each other{' and from the sweep' if besides else ''} (a schedule is judged once)")
            self.budget_cuts = (*self.budget_cuts, note)
            ctx.say(f"{self.name}: {note}")
        return run_plan(self, ctx, list(plan),
                              lambda i, seed, schedule, trial:
                              f"{self.name}: random [{i}/{len(plan)}] seed {seed} {schedule} -> {trial.outcome}",
                              stop_on_budget)

    def run(self, ctx: Context) -> list[Trial]:
        """What `killpoint run` does: every single fault, then random schedules within the budget (none the
        sweep ran)."""
        return self.exhaustive(ctx) + self.random(ctx, ctx.random_count, stop_on_budget=True,
                                                  besides=self.sweep_plan(ctx))

    shrink_budget = 36
    """Trials all shrinking of one scenario may run (`run.shrinking.with_shrunk`; each failure's share is at
    most 12)."""

    # ---- policy: what the trials add up to -----------------------------------------------------------
    def skip_why(self, ctx: Context) -> str | None:
        """Why this scenario is skipped in this session (`skip_reason`, a black-box worker, `--actions`), or
        None; says nothing."""
        reason = self.skip_reason(ctx)
        if reason is None and self.black_box_reason and ctx.session.env.black_box:
            reason = f"does not apply to a black-box worker (--worker-cmd): {self.black_box_reason}"
        if reason is None and self.actions and not self.actions_in(ctx):
            reason = f"its faults ({', '.join(self.actions)}) are not among --actions {','.join(ctx.actions)}"
        return reason

    def inapplicable(self, ctx: Context) -> str | None:
        """Why this scenario does not apply to the agent, from its crash-free run (`needs`), or None."""
        if not self.needs:
            return None
        base = ctx.session.baseline(self.options(ctx.session.options), self.agent(ctx))
        made = {"service": bool(base.effects or service_attempts(base)),
                "model": bool(base.model_requests) or any(a.get("service") in MODEL_SERVICES for a in base.attempts)}
        if any(made[need] for need in self.needs):
            return None
        what = " or to ".join(NEEDED[need] for need in self.needs)
        return f"does not apply: the agent's crash-free run made no request to {what}, so its faults have nothing to act on"

    def skipped(self, ctx: Context, started: float) -> ScenarioResult | None:
        """The `skipped` result (with its reason) when this scenario cannot run in this session or does not
        apply to the agent (`inapplicable`: its crash-free run is run for that, as the trials would), else None."""
        reason = self.skip_why(ctx) or self.inapplicable(ctx)
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
                                  reason=f"{OTHER_SHARDS} all {self.left_to_other_shards} of its trials run in other shards")
        outcomes = {t.outcome for t in trials}
        outcome: ScenarioOutcome = ("fail" if "fail" in outcomes else
                                    "unknown" if "unknown" in outcomes or not trials else "pass")
        reason = (self.untested or "nothing to test: no schedule was made for this agent") if not trials else ""
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
    from killpoint.run.catalog import entries, known

    obj = entries()[known(name)].entry_point.load()
    return obj() if isinstance(obj, type) else obj


def replay_command(scenario: str, schedule: Schedule | None = None, seed: int | None = None,
                   steps: str = DEFAULT_STEPS, grace: float | None = None, previous_steps: str | None = None,
                   worker_cmd: str | None = None, effects: dict[str, str] | None = None,
                   adapter: str | None = None, run_timeout: float | None = None, command: str = "replay",
                   exit_codes: str | None = None, allow_egress: Sequence[str] = (),
                   skip_checkers: Sequence[str] = ()) -> str:
    """The one line that reproduces a trial (with `--grace` or `--run-timeout` when the trial ran with another
    grace or time budget than the default, `--exit-codes` when it was held to another convention than its
    worker's default, `--allow-egress` for each host its worker was let reach, `--skip-checker` for each
    checker its session left out, and `--previous-steps` when it
    resumed a run of the agent's previous code); `command="run"` with no schedule and no seed: a run of the
    scenario, whose crash-free run comes first."""
    parts = [f"killpoint {command}", f"--scenario {scenario}"]
    if schedule is not None:
        parts.append(f"--schedule '{schedule}'")
    elif seed is not None:
        parts.append(f"--seed {seed}")
    if steps != DEFAULT_STEPS:
        parts.append(f"--steps {steps}")
    if grace is not None and grace != RunOptions.grace:
        parts.append(f"--grace {grace:g}")
    if run_timeout is not None and run_timeout != RunOptions.time_budget:
        parts.append(f"--run-timeout {run_timeout:g}")
    if previous_steps:
        parts.append(f"--previous-steps {previous_steps}")
    if worker_cmd:
        parts.append(f"--worker-cmd {shlex.quote(worker_cmd)}")
    if adapter and adapter != "checkpoints":
        parts.append(f"--adapter {adapter}")
    if exit_codes is not None and exit_codes != ("none" if worker_cmd else "killpoint"):
        parts.append(f"--exit-codes {exit_codes}")
    for host in allow_egress:
        parts.append(f"--allow-egress {shlex.quote(host)}")
    for name in sorted(skip_checkers):
        parts.append(f"--skip-checker {name}")
    for name, url in (effects or {}).items():
        parts.append(f"--effect {shlex.quote(f'{name}={url}')}")
    return " ".join(parts)
