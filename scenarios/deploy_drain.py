"""deploy-drain: SIGTERM mid-step, as a rolling deploy sends it, with grace periods longer and shorter
than the step.

- Grace longer than the step (the session's `--grace`, default 5 s; the step a SIGTERM lands in takes 0.3 s,
  the others no time (`slow_steps`: a drain needs only its own step in flight); the worker's drain
  deadline at 0.8 x grace): the worker finishes the step in flight, checkpoints it as `paused` and exits
  0 before the grace period ends, taking no new step; a new worker resumes. One trial per step (SIGTERM at
  its start) and one with a service request in flight.
- Grace shorter than the step (that step takes 1 s, the drain deadline is 0.4 s): with a grace of 0.8 s the worker
  gives up at its own drain deadline (exit 6) before the SIGKILL would come; with a grace of 0.1 s the
  SIGKILL comes first. Either way the step in flight is lost, and the resume must still be correct.

The figures compare the drain time (SIGTERM to exit, from the history's monotonic `t`) with the grace
period. The variant follows from the grace alone, so `killpoint replay ... --grace G` reproduces a trial.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from killpoint.checkers import CRASH_CHECKERS
from killpoint.events import FaultFired, IncEnd
from killpoint.faults.schedule import Fault, Schedule
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial, TrialSpec
from killpoint.scenarios.common import run_each

LONG_GRACE_FROM = 1.0
"""A grace of at least this many seconds is "longer than the step"."""
LONG_STEP_SECONDS = 0.3
SHORT_STEP_SECONDS = 1.0
SHORT_DRAIN_SECONDS = 0.4
SHORT_GRACES = (0.8, 0.1)
"""Above the short drain deadline (the worker exits 6 first), and below it (SIGKILL comes first)."""


@dataclass(frozen=True)
class Variant:
    """How long steps take, when the worker gives up draining, and what a correct worker then does:
    `checkpoint` (drain: exit 0, paused), `exit` (exit 6 at its drain deadline) or `kill` (SIGKILLed)."""

    grace: float
    step_delay: float
    drain_seconds: float

    @classmethod
    def for_grace(cls, grace: float) -> Variant:
        if grace >= LONG_GRACE_FROM:
            return cls(grace, LONG_STEP_SECONDS, round(0.8 * grace, 3))
        return cls(grace, SHORT_STEP_SECONDS, SHORT_DRAIN_SECONDS)

    @property
    def expect(self) -> str:
        if self.step_delay < self.drain_seconds:
            return "checkpoint"
        return "exit" if self.drain_seconds < self.grace else "kill"

    def checkers(self) -> tuple[str, ...]:
        """All crash checkers; a SIGKILL after a too-short grace is expected, so drains_on_sigterm is off."""
        if self.expect == "kill":
            return tuple(c for c in CRASH_CHECKERS if c != "drains_on_sigterm")
        return CRASH_CHECKERS


class DeployDrain(Scenario):
    name = "deploy-drain"
    judged_once = False  # its plan's items are a schedule and a grace
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 6.1  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "SIGTERM mid-step: drain and exit 0 within a long grace; resume correctly after a short one"
    actions = ("term",)

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None,
              grace: float | None = None, run_id: str | None = None) -> Trial:
        """One run under `schedule` with the variant of `grace` (default: the session's `--grace`)."""
        v = Variant.for_grace(ctx.session.options.grace if grace is None else grace)
        # Only the steps a SIGTERM lands in are slow: a drain needs its step in flight, the others need not wait.
        slow = tuple(dict.fromkeys(f.step for f in schedule if f.action == "term"))
        options = replace(self.options(ctx.session.options), grace=v.grace, step_delay=v.step_delay,
                          drain_seconds=v.drain_seconds, slow_steps=slow)
        extra = {"drain_expect": "checkpoint" if v.expect == "checkpoint" else "exit", "expect": v.expect,
                 "step_delay": v.step_delay, "drain_seconds": v.drain_seconds}
        spec = TrialSpec(options, v.checkers(), setup=lambda _conn, _run_id: extra, agent=self.agent(ctx))
        return ctx.session.trial(schedule, spec, prefix=self.name, seed=seed, explicit=ctx.explicit, run_id=run_id)

    def run(self, ctx: Context) -> list[Trial]:
        points = self.step_points(ctx)
        if not self.testable(ctx, points):
            return []  # no step to send a SIGTERM into: unknown with the reason, not an IndexError
        effect_steps = [s for s, ps in points.items() if "effect.received" in ps] or list(points)
        long = [Fault(s, first_point(points, s), "term") for s in points]
        long += [Fault(s, "effect.received", "term") for s in effect_steps[-1:] if "effect.received" in points[s]]
        plan = [(Schedule((f,)), None) for f in long]
        plan += [(Schedule((Fault(effect_steps[0], first_point(points, effect_steps[0]), "term"),)), SHORT_GRACES[0]),
                 (Schedule((Fault(effect_steps[-1], first_point(points, effect_steps[-1]), "term"),)), SHORT_GRACES[1])]
        plan = in_shard(self, ctx, plan, lambda item: (item[0] if item[1] is None else f"{item[0]} grace {item[1]:g}", None))
        # Concurrently under -j: a trial spends its seconds in the steps' deliberate delays, not on a core. Not
        # a black-box worker that is exec'd: each of its incarnations starts by importing its framework, seconds
        # of CPU (measured: LangGraph's ReAct agent 5 s, Pydantic AI with DBOS 8 s), and eight at once on two
        # cores outran the runs' time budget. Forked from servers that preloaded it, one starts in milliseconds.
        env = ctx.session.env
        return run_each(ctx, self.name, plan, lambda item, run_id: self.trial(ctx, item[0], grace=item[1], run_id=run_id),
                        lambda item, t: f"{item[0]} grace {t.evidence.knobs.grace}s ({_ending(t)})",
                        concurrent=not env.black_box or env.black_box_forked)

    def exhaustive(self, ctx: Context) -> list[Trial]:
        return self.run(ctx)

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "drain 0.31s / grace 5.0s; grace 0.8s: exit 6; grace 0.1s: SIGKILL"."""
        parts = []
        drains = [(d, t.evidence.knobs.grace) for t in trials if t.evidence.extra.get("expect") == "checkpoint"
                  for d in drain_times(t)]
        if drains:
            d, g = max(drains)
            parts.append(f"drain {d:.2f}s / grace {g:.1f}s")
        for t in trials:
            if t.evidence.extra.get("expect") in ("exit", "kill"):
                parts.append(f"grace {t.evidence.knobs.grace:g}s: {_ending(t)}")
        return "; ".join(parts)


def first_point(points: dict[str, list[str]], step: str) -> str:
    """Where a SIGTERM lands "mid-step" in `step`: at its start when the worker reports `step.start` (a
    white-box worker), else at the first point the crash-free run reached in it (a black-box worker,
    held only at its service requests and checkpoint commits, never reports `step.start`)."""
    return "step.start" if "step.start" in points[step] else points[step][0]


def drain_times(trial: Trial) -> list[float]:
    """Seconds from each SIGTERM (the `term` fault) to the end of the incarnation it hit."""
    events = trial.evidence.events
    out = []
    for f in (e for e in events if isinstance(e, FaultFired) and e.action == "term"):
        end = next((e for e in events if isinstance(e, IncEnd) and e.inc == f.inc), None)
        if end is not None:
            out.append(end.t - f.t)
    return out


def _ending(trial: Trial) -> str:
    """How the incarnations that got a SIGTERM ended: "exit 0", "exit 6", "SIGKILL"."""
    hit = {f.inc for f in trial.evidence.faults() if f.action == "term"}
    ends = [i for i in trial.evidence.incarnations if i.get("inc") in hit]
    return ", ".join("SIGKILL" if i.get("signal") == 9 else f"signal {i['signal']}" if i.get("signal")
                     else f"exit {i.get('exit_code')}" for i in ends) or "no SIGTERM landed"
