"""rollback-refusal: a checkpoint the code cannot read is refused loudly, and nothing is touched.

Each trial seeds one checkpoint row before the first incarnation and runs the agent on it:

- `newer`: written by the next version (STATE_VERSION + 1), as after a rollback of the code;
- `missing-fields`: a payload without the checkpoint's fields (IncompatibleCheckpoint);
- `not-an-object`: a payload that is a bare JSON string (IncompatibleCheckpoint).

Each must be refused with the documented exit code (3) and a message naming the refusal; the row must be
unchanged, with no model call and no effect (refuses_newer_version), and no process left (no_orphans).
The trials are numbered by seed (0, 1, 2): `killpoint replay --scenario rollback-refusal --seed 1`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from killpoint.checkers import Evidence, Verdict
from killpoint.checkers.verdict import failed, passed
from killpoint.env.launcher import Incarnation
from killpoint.env.stepmodule import AgentSpec
from killpoint.events import Note
from killpoint.faults.schedule import Schedule
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial, TrialSpec
from killpoint.scenarios.common import run_each

REFUSED_EXIT = 3
KINDS = ("newer", "missing-fields", "not-an-object")
SEEDED_SEQ = 7
LOG_TAIL = 4000


def payload(kind: str, agent: AgentSpec, run_id: str) -> tuple[object, int]:
    """The stored payload of a `kind` checkpoint for `run_id`, and the version a refusal should name."""
    newer = agent.state_version + 1
    if kind == "newer":
        module = importlib.import_module(agent.module)
        state = {**module.initial_state({}), f"added_in_v{newer}": True}
        return ({"run_id": run_id, "seq": SEEDED_SEQ, "version": newer, "cursor": agent.start,
                 "status": "paused", "state": state, "window": [], "cost_usd": 0.0,
                 "updated_at": "2030-01-01T00:00:00+00:00"}, newer)
    if kind == "missing-fields":
        return {"run_id": run_id, "seq": SEEDED_SEQ, "cursor": agent.start}, agent.state_version
    return "a checkpoint from another program", agent.state_version


def seeder(kind: str, agent: AgentSpec) -> Callable[[psycopg.Connection, str], dict]:
    """A trial setup that stores the `kind` checkpoint and returns what the checkers need."""
    def setup(conn: psycopg.Connection, run_id: str) -> dict:
        data, version = payload(kind, agent, run_id)
        raw = conn.execute(
            "INSERT INTO checkpoints (run_id, seq, status, data) VALUES (%s, %s, 'paused', %s) RETURNING data::text",
            (run_id, SEEDED_SEQ, Jsonb(data))).fetchone()[0]
        return {"seeded_raw": raw, "seeded_kind": kind, "seeded_version": version}
    return setup


def log_tails(incs: list[Incarnation]) -> dict:
    """The end of each incarnation's log (what `refusal_explained` reads), kept with the evidence."""
    logs = {i.inc: Path(i.log).read_text(errors="replace")[-LOG_TAIL:] for i in incs if i.log and Path(i.log).exists()}
    return {"logs": logs}


def refusal_explained(ev: Evidence, base: Evidence | None = None) -> Verdict:
    """Each refusing incarnation said why: a `refused.*` note, or its log naming the refusal (and, for a
    newer checkpoint, the version it found)."""
    logs: dict[str, str] = ev.extra.get("logs") or {}
    version = str(ev.extra.get("seeded_version"))
    newer = ev.extra.get("seeded_kind") == "newer"
    notes = {e.inc: str(e.extra.get("message") or e.note) for e in ev.events
             if isinstance(e, Note) and str(e.note).startswith("refused")}
    mute = []
    for i in ev.incarnations:
        if i.get("exit_code") != REFUSED_EXIT:
            continue
        said = notes.get(i.get("inc"), "") + "\n" + logs.get(i.get("inc"), "")
        if "refus" not in said.lower() or (newer and version not in said):
            mute.append(f"{i.get('inc')} exited {REFUSED_EXIT} without a message naming the refusal"
                        + (f" of version {version}" if newer else ""))
    if mute:
        return failed("refusal_explained", "a refusal did not say why", mute)
    line = next(iter(notes.values()), "").strip()
    return passed("refusal_explained", line[:160] or "the worker's log names the refusal")


class RollbackRefusal(Scenario):
    name = "rollback-refusal"
    judged_once = False  # a trial's seed picks the kind of checkpoint it seeds (`KINDS`)
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 0.3  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "a checkpoint from newer code, or one that does not parse, is refused: exit 3, nothing touched"
    black_box_reason = "it plants checkpoints of the seeds' shape from newer code, and a framework keeps its own"
    checkers = ("refuses_newer_version", "no_orphans")
    actions = ()

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        """The trial of kind KINDS[seed] (default: a newer checkpoint)."""
        kind = KINDS[seed % len(KINDS)] if seed is not None else KINDS[0]
        agent = self.agent(ctx)
        spec = TrialSpec(self.options(ctx.session.options), (*self.checkers, refusal_explained),
                         setup=seeder(kind, agent), agent=agent, observe=log_tails, alone=True)
        return ctx.session.trial(schedule, spec, prefix=f"{self.name}-{kind}", seed=seed, explicit=ctx.explicit)

    def run(self, ctx: Context) -> list[Trial]:
        seeds = in_shard(self, ctx, range(len(KINDS)), lambda seed: (KINDS[seed], seed))
        return run_each(ctx, self.name, seeds, lambda seed, _id: self.trial(ctx, Schedule(), seed),
                        lambda seed, t: f"{KINDS[seed]} checkpoint: exit "
                                        f"{[i.get('exit_code') for i in t.evidence.incarnations]}")

    def exhaustive(self, ctx: Context) -> list[Trial]:
        return self.run(ctx)

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "refused 3/3 with exit 3 (newer, missing-fields, not-an-object)"."""
        ok = [t for t in trials if t.evidence.incarnations
              and all(i.get("exit_code") == REFUSED_EXIT for i in t.evidence.incarnations)]
        kinds = ", ".join(str(t.evidence.extra.get("seeded_kind")) for t in trials)
        return f"refused {len(ok)}/{len(trials)} with exit {REFUSED_EXIT} ({kinds})"

