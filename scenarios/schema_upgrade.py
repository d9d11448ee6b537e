"""schema-upgrade: a run paused under the previous code (version N-1) is resumed under the current code
(version N), which migrates its checkpoint; the result equals a run done wholly at version N.

Each trial drives one run twice on the same run id: first under the previous step module for one
incarnation, which a fault stops at some step (`term` at a step's start: it drains and pauses; `kill`
after an effect: it dies with the effect applied and not checkpointed), then under the current module
until done. The evidence covers both drives. Judged by completes, exactly_once, same_final_state (against
a crash-free run wholly at version N), migrates_older_version, no_rewind, context_fidelity, no_orphans.

The previous code is `--previous-steps pkg.module`; for the reference agent it defaults to
`killpoint.reference_agent.invoice_agent_v2`. Without it (a user's step module), the scenario is skipped with the
reason, never passed.
"""

from __future__ import annotations

import psycopg

from killpoint.env.stepmodule import AgentSpec, load
from killpoint.errors import UsageError
from killpoint.faults.schedule import Fault, Schedule
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Setup, Trial, Upgrade, step_points
from killpoint.scenarios.common import run_each

PREVIOUS = {"killpoint.reference_agent.invoice_agent": "killpoint.reference_agent.invoice_agent_v2"}
"""The previous code of the project's own agents."""


def paused(previous: AgentSpec, current: AgentSpec) -> Setup:
    """What the checkers need to know of the checkpoint the previous code left."""
    def between(conn: psycopg.Connection, run_id: str) -> dict:
        row = conn.execute("SELECT (data->>'version')::int, data->>'cursor', status FROM checkpoints "
                           "WHERE run_id = %s", (run_id,)).fetchone()
        return {"previous_steps": previous.module, "state_version": current.state_version,
                "seeded_version": row[0] if row else None, "paused_at": row[1] if row else None,
                "paused_status": row[2] if row else None}
    return between


class SchemaUpgrade(Scenario):
    name = "schema-upgrade"
    summary = "pause under the previous code (version N-1), resume under version N with a migration"
    black_box_reason = "it resumes a run under the previous step module (--previous-steps), a reference-runtime notion"
    checkers = ("completes", "exactly_once", "same_final_state", "migrates_older_version", "no_rewind",
                "context_fidelity", "no_orphans")
    actions = ("term", "kill")

    def agents(self, ctx: Context) -> tuple[AgentSpec, AgentSpec]:
        """(previous code, current code); UsageError when there is no usable previous code."""
        current = self.agent(ctx)
        module = ctx.previous_steps or PREVIOUS.get(current.module)
        if module is None:
            raise UsageError("no-previous-steps", f"schema-upgrade needs the code before {current.module}",
                             "give --previous-steps pkg.module: the step module at the version before")
        previous = load(module)
        if previous.state_version >= current.state_version:
            raise UsageError("previous-not-older", f"--previous-steps {module} is at version "
                             f"{previous.state_version}, not older than {current.module}'s {current.state_version}",
                             "give the step module of an older STATE_VERSION")
        return previous, current

    def skip_reason(self, ctx: Context) -> str | None:
        try:
            self.agents(ctx)
        except UsageError as exc:
            return f"{exc.message} ({exc.fix})"
        return None

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        """Stop the previous code with `schedule` (one incarnation), then finish under the current code."""
        previous, current = self.agents(ctx)
        return ctx.session.trial(schedule, explicit=ctx.explicit, prefix=self.name, seed=seed, options=self.options(ctx.session.options),
                                 checkers=self.checkers, agent=current,
                                 upgrade=Upgrade(previous, paused(previous, current)))

    def run(self, ctx: Context) -> list[Trial]:
        """Pause after each step but the last (term at its start), and after each effect (kill)."""
        previous, _ = self.agents(ctx)
        points = step_points(ctx.session.baseline(self.options(ctx.session.options), previous))
        steps = list(points)[:-1]  # the last step finishes the run: nothing left for the new code
        faults = [Fault(st, "step.start", "term") for st in steps]
        faults += [Fault(st, "effect.applied", "kill") for st in steps if "effect.applied" in points[st]]
        return run_each(ctx, self.name, faults, lambda fault: self.trial(ctx, Schedule((fault,))),
                        lambda fault, t: f"{fault}: v{t.evidence.options.get('seeded_version')} paused at "
                                         f"{t.evidence.options.get('paused_at')}")

    def exhaustive(self, ctx: Context) -> list[Trial]:
        return self.run(ctx)

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "v2 -> v3 (previous code: killpoint.reference_agent.invoice_agent_v2), paused at 5 points"."""
        if not trials:
            return ""
        o = trials[0].evidence.options
        return (f"v{o.get('seeded_version')} -> v{o.get('state_version')} (previous code: "
                f"{o.get('previous_steps')}), paused at {len(trials)} points")
