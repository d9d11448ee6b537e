"""stored-checkpoints: checkpoints that earlier runs of the agent's older code left are resumed by the
current code, which must finish them (after migrating them when their STATE_VERSION is older).

Every `killpoint run` (without `--no-store`) ends by keeping a few mid-run checkpoints of the code it ran
under `.killpoint/checkpoints/` (`killpoint.run.checkpoint_store`): one per cursor of the crash-free run,
each the checkpoints row exactly as the runtime stored it, with the module, its STATE_VERSION and digest.
So no old code has to be kept importable, nor the project be a git checkout: change the step module and run
again, and this scenario takes the checkpoints kept from another digest of the same module (at the same or
an older STATE_VERSION; a newer one is rollback-refusal's matter), sorted by file name.

Each trial plants one of them under a fresh run id of this session (the row as stored, its run id replaced,
in the column and in the payload) and runs the current code on it until done. Judged by completes,
resumes_old_checkpoints (a crash of the current code on a same-version checkpoint is "state shape changed
without a STATE_VERSION bump: <error>"), migrates_older_version (when the kept one is older), no_rewind and
no_orphans; not against a crash-free run (the kept run's earlier effects happened in another session).

With nothing kept from an earlier digest (the first run, `--no-store`, a black-box worker), the scenario is
skipped with the reason, never passed. A trial's seed names its kept checkpoint (a hash of the file name):
`killpoint replay --scenario stored-checkpoints --seed N` resumes the same one while it is kept.
"""

from __future__ import annotations

import copy
from collections.abc import Collection

import psycopg
from psycopg.types.json import Jsonb

from killpoint.errors import UsageError
from killpoint.faults.schedule import Schedule
from killpoint.run.checkpoint_store import StoredCheckpoint
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Setup, Trial, TrialSpec
from killpoint.scenarios.common import run_each
from killpoint.scenarios.schema_upgrade import resumes_old_checkpoints


def planter(kept: StoredCheckpoint, state_version: int) -> Setup:
    """A trial setup that stores `kept`'s row under the trial's run id, and what the checkers need."""
    def setup(conn: psycopg.Connection, run_id: str) -> dict:
        data = copy.deepcopy(kept.data)
        if isinstance(data, dict) and "run_id" in data:
            data["run_id"] = run_id
        conn.execute("INSERT INTO checkpoints (run_id, seq, status, data) VALUES (%s, %s, %s, %s)",
                     (run_id, kept.seq, kept.status, Jsonb(data)))
        return {"stored_checkpoint": kept.name, "stored_digest": kept.digest, "stopped_by": kept.stopped_by,
                "state_version": state_version, "seeded_version": kept.state_version, "paused_at": kept.cursor,
                "paused_status": kept.status}
    return setup


class StoredCheckpoints(Scenario):
    name = "stored-checkpoints"
    judged_once = False  # a trial's seed names the kept checkpoint it resumes
    cost = 0.5  # seconds, reference agent, -j 1 (bench/shards.py)
    local_plan = True  # the checkpoints this machine kept
    summary = "checkpoints kept by earlier runs of older code (.killpoint/checkpoints) resume under the current code"
    black_box_reason = "it plants checkpoints of the seeds' shape kept from earlier runs, and a framework keeps its own"
    checkers = ("completes", "no_rewind", "no_orphans")
    actions = ()

    def kept(self, ctx: Context) -> list[StoredCheckpoint]:
        """The checkpoints to resume, sorted by file name (none when the store is off)."""
        store = ctx.checkpoints
        return [] if store is None else store.older(self.agent(ctx))

    def skip_reason(self, ctx: Context) -> str | None:
        if ctx.session.env.black_box:
            return None  # `skipped` says the black-box reason
        if ctx.checkpoints is None:
            return "the checkpoint store is off (--no-store)"
        if self.kept(ctx):
            return None
        agent = self.agent(ctx)
        return (f"no checkpoint of {agent.module} kept from an earlier version in {ctx.checkpoints.root} "
                f"(each killpoint run keeps its code's; this is digest {agent.digest}: change the code and run again)")

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        """Resume the kept checkpoint that `seed` names under the current code."""
        kept = self.kept(ctx)
        found = next((k for k in kept if k.seed == seed), None) if not len(schedule) else None
        if found is None:
            seeds = ", ".join(f"{k.seed} ({k.name})" for k in kept[:5]) or "none kept"
            raise UsageError("no-stored-checkpoint", f"stored-checkpoints: no kept checkpoint has seed {seed}"
                             + (f" (a schedule {schedule} was given)" if len(schedule) else ""),
                             f"give --seed of a kept checkpoint ({seeds}), no --schedule")
        agent = self.agent(ctx)
        checkers = (resumes_old_checkpoints, *self.checkers)
        if found.state_version < agent.state_version:
            checkers = (*checkers, "migrates_older_version")
        spec = TrialSpec(self.options(ctx.session.options), checkers, setup=planter(found, agent.state_version),
                         agent=agent, alone=True)
        return ctx.session.trial(Schedule(), spec, prefix=self.name, seed=found.seed, explicit=False)

    def schedule_from_seed(self, ctx: Context, seed: int) -> Schedule:
        return Schedule()  # a seed names a kept checkpoint, resumed with no fault

    def run(self, ctx: Context) -> list[Trial]:
        """Resume each kept checkpoint, in file-name order."""
        kept = in_shard(self, ctx, self.kept(ctx), lambda k: (k.name, k.seed), local=True)
        return run_each(ctx, self.name, kept, lambda k, _id: self.trial(ctx, Schedule(), k.seed),
                        lambda k, _t: f"{k.name} (v{k.state_version}, {k.status} at {k.cursor}, seed {k.seed})")

    def exhaustive(self, ctx: Context) -> list[Trial]:
        return self.run(ctx)

    def random(self, ctx: Context, count: int, *, stop_on_budget: bool = False,
               besides: Collection[Schedule] = ()) -> list[Trial]:
        return self.run(ctx)  # nothing random: each kept checkpoint once

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "resumed 3 checkpoints kept from 1 earlier digest (v1) under v2"."""
        if not trials:
            return ""
        extras = [t.evidence.extra for t in trials]
        digests = {o.get("stored_digest") for o in extras}
        versions = ", ".join(f"v{v}" for v in sorted({o.get("seeded_version") for o in extras}))
        return (f"resumed {len(trials)} checkpoint{'s' if len(trials) != 1 else ''} kept from {len(digests)} earlier "
                f"digest{'s' if len(digests) != 1 else ''} ({versions}) under v{extras[0].get('state_version')}")
