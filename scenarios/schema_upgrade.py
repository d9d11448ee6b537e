"""schema-upgrade: a run paused under the previous code (version N-1) is resumed under the current code
(version N), which migrates its checkpoint; the result equals a run done wholly at version N.

Each trial drives one run twice on the same run id: first under the previous step module for one
incarnation, which a fault stops at some step (`term` at a step's start: it drains and pauses; `kill`
after an effect: it dies with the effect applied and not checkpointed), then under the current module
until done. The evidence covers both drives. Judged by completes, exactly_once, same_final_state (against
a crash-free run wholly at version N), migrates_older_version, no_rewind, context_fidelity, no_orphans.

The previous code is `--previous-steps pkg.module`, or `--previous-steps git:REF`: the step module's package
as it was at that commit (`killpoint.env.previous`), imported under its own name from a private temp dir.
Without it, the step module's own `PREVIOUS_STEPS` names it (the reference agent's is
`killpoint.reference_agent.invoice_agent_v2`), and a step module in a git
checkout gets the last commit that changed its file(s) before its current version (the figures name it).
With no previous code (not in git, one version only), the scenario is skipped with the reason, never passed.

A previous version with the same STATE_VERSION is run too: its checkpoints must resume under the current code
as they are. If the current code crashes on one (a field renamed without a bump: KeyError), the
`resumes_old_checkpoints` verdict says "state shape changed without a STATE_VERSION bump: <error>".
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from killpoint.checkers import Evidence, Verdict
from killpoint.checkers.verdict import failed, passed, unknown
from killpoint.env.previous import is_git
from killpoint.env.stepmodule import AgentSpec, load
from killpoint.errors import UsageError
from killpoint.faults.schedule import Fault, Schedule
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Setup, Trial, TrialSpec, Upgrade, step_points
from killpoint.scenarios.common import run_each


def paused(previous: AgentSpec, current: AgentSpec, label: str | None = None) -> Setup:
    """What the checkers need to know of the checkpoint the previous code left (`label`: how the previous
    code is named on the command line, when not by its module)."""
    def between(conn: psycopg.Connection, run_id: str) -> dict:
        row = conn.execute("SELECT (data->>'version')::int, data->>'cursor', status FROM checkpoints "
                           "WHERE run_id = %s", (run_id,)).fetchone()
        return {"previous_steps": (label or previous.module).split(" ")[0], "previous_how": label,
                "state_version": current.state_version,
                "seeded_version": row[0] if row else None, "paused_at": row[1] if row else None,
                "paused_status": row[2] if row else None}
    return between


SHAPE = "state shape changed without a STATE_VERSION bump"


def resumes_old_checkpoints(ev: Evidence, base: Evidence | None = None) -> Verdict:
    """The current code resumed the previous code's checkpoint without dying of an exception. The first
    incarnation is the previous code's (its one drive) when the trial ran the previous code
    (the scenario's `extra["previous_steps"]`); a crash of any other is the current code's (a checkpoint kept by an
    earlier run, `stored-checkpoints`, is resumed by the current code from the first incarnation on).
    At the same STATE_VERSION that is a state shape changed without a version bump."""
    name = "resumes_old_checkpoints"
    current, old = ev.extra.get("state_version"), ev.extra.get("seeded_version")
    if not ev.incarnations:
        return unknown(name, "no incarnation ran")
    first = ev.incarnations[0].get("inc") if ev.extra.get("previous_steps") else None
    crashed = {inc: c for inc, c in ev.crashes.items() if inc != first}
    if not crashed:
        return passed(name, f"version-{current} code resumed the version-{old} checkpoint without a crash")
    inc, crash = next(iter(crashed.items()))
    tail = [str(line) for line in crash.get("tail") or []]
    error = tail[-1].strip() if tail else f"exit {crash.get('exit_code')}"
    where = [f"{inc} died resuming it (log {crash.get('log')})", *tail[-3:]]
    if old is not None and old == current:
        return failed(name, f"{SHAPE}: {error}", where)
    return failed(name, f"version-{current} code died resuming a version-{old} checkpoint: {error}", where)


def upgrade_faults(points: dict[str, list[str]], allowed: Sequence[str] = ("term", "kill")) -> list[Fault]:
    """The single faults that leave a checkpoint of the previous code: a `term` at the start of each step but
    the last, a `kill` after each step's effect; only those of the `allowed` actions (`--actions`)."""
    faults = [Fault(st, "step.start", "term") for st in list(points)[:-1]] if "term" in allowed else []
    if "kill" in allowed:
        faults += [Fault(st, "effect.applied", "kill") for st in points if "effect.applied" in points[st]]
    return faults


class SchemaUpgrade(Scenario):
    name = "schema-upgrade"
    cost = 3.5  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "pause under the previous code (version N-1), resume under version N with a migration"
    black_box_reason = "it resumes a run under the previous step module (--previous-steps), a reference-runtime notion"
    checkers = ("completes", "exactly_once", "same_final_state", "migrates_older_version", "no_rewind",
                "context_fidelity", "no_orphans")
    actions = ("term", "kill")

    def agents(self, ctx: Context) -> tuple[AgentSpec, AgentSpec]:
        """(previous code, current code); UsageError when there is no usable previous code."""
        return self.previous(ctx)[:2]

    def previous(self, ctx: Context) -> tuple[AgentSpec, AgentSpec, str | None]:
        """(previous code, current code, how the previous code is named when it came from git: its commit,
        and how that commit was chosen)."""
        current = self.agent(ctx)
        label: str | None = None
        module = ctx.previous_steps if not is_git(ctx.previous_steps) else None
        module = module or (current.previous_steps if not ctx.previous_steps else None)
        code = ctx.session.previous_code
        if module is not None:
            previous = load(module)
        elif code is not None and code.current.module == current.module and code.get() is not None:
            found = code.get()
            assert found is not None
            previous, label = found.agent, f"{found.label} ({found.how})"
        else:
            why = code.reason if code is not None and code.current.module == current.module else None
            raise UsageError("no-previous-steps", f"schema-upgrade needs the code before {current.module}"
                             + (f" ({why})" if why else ""),
                             "give --previous-steps git:REF (the step module at an earlier commit) or "
                             "--previous-steps pkg.module: the step module at the version before")
        if previous.state_version > current.state_version:
            raise UsageError("previous-not-older", f"--previous-steps {label or module} is at version "
                             f"{previous.state_version}, newer than {current.module}'s {current.state_version}",
                             "give the step module of an older (or the same) STATE_VERSION")
        return previous, current, label

    def skip_reason(self, ctx: Context) -> str | None:
        try:
            self.agents(ctx)
        except UsageError as exc:
            return f"{exc.message} ({exc.fix})"
        return None

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        """Stop the previous code with `schedule` (one incarnation), then finish under the current code."""
        previous, current, label = self.previous(ctx)
        spec = TrialSpec(self.options(ctx.session.options), (resumes_old_checkpoints, *self.checkers), agent=current,
                         upgrade=Upgrade(previous, paused(previous, current, label)))
        return ctx.session.trial(schedule, spec, prefix=self.name, seed=seed, explicit=ctx.explicit)

    def run(self, ctx: Context) -> list[Trial]:
        """Pause at the start of each step but the last (term: a drained worker finishes the step it is in,
        and the last one finishes the run, leaving nothing for the new code), and kill after each step's
        effect, the last step's too (its checkpoint, written by the previous code, is resumed by the current
        code, which redoes the step: an agent of one step is tested by that alone)."""
        previous, _, label = self.previous(ctx)
        if label:
            ctx.say(f"{self.name}: previous code {label}")
        points = step_points(ctx.session.baseline(self.options(ctx.session.options), previous))
        faults = upgrade_faults(points, self.actions_in(ctx))
        if not faults:
            self.untested = (
                f"nothing to test with --actions {','.join(ctx.actions)}: a checkpoint of the previous code is left "
                "by a term at a step's start or a kill after an effect, and neither fits" if upgrade_faults(points)
                else f"nothing to test: the previous code's crash-free run has {len(points)} step(s) and no effect "
                "inside one, so it cannot leave a checkpoint for the current code to resume")
            ctx.say(f"{self.name}: {self.untested}")
        faults = in_shard(self, ctx, faults, lambda fault: (Schedule((fault,)), None))
        return run_each(ctx, self.name, faults, lambda fault, _id: self.trial(ctx, Schedule((fault,))),
                        lambda fault, t: f"{fault}: v{t.evidence.extra.get('seeded_version')} paused at "
                                         f"{t.evidence.extra.get('paused_at')}")

    def exhaustive(self, ctx: Context) -> list[Trial]:
        return self.run(ctx)

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "v2 -> v3 (previous code: killpoint.reference_agent.invoice_agent_v2), paused at 5 points"."""
        if not trials:
            return ""
        o = trials[0].evidence.extra
        return (f"v{o.get('seeded_version')} -> v{o.get('state_version')} (previous code: "
                f"{o.get('previous_how') or o.get('previous_steps')}), paused at {len(trials)} points")
