"""db-crash: Postgres is killed (immediate shutdown, as a power cut) inside the checkpoint transaction and
just after its commit, at every step, then restarted.

The worker loses its connection and exits with an error; the interpreter starts another incarnation,
which resumes from the last committed checkpoint. Judged by every crash checker, plus `commits_survive`:
the write committed when the database died is in the audit trail afterwards, and the one still open is
not (the audit trigger records only committed writes, in the same database).

Needs a database killpoint owns (`--postgres local|docker|embedded`); on a `--dsn` database the scenario
is skipped with that reason.
"""

from __future__ import annotations

from killpoint.checkers import CRASH_CHECKERS
from killpoint.events import DbUp
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial

POINTS = ("checkpoint.writing", "checkpoint.committed")


class DbCrash(Scenario):
    name = "db-crash"
    cost = 3.1  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "Postgres killed inside the checkpoint transaction and after its commit, then restarted"
    checkers = (*CRASH_CHECKERS, "commits_survive")
    actions = ("db-crash",)

    def skip_reason(self, ctx: Context) -> str | None:
        pg = ctx.session.env.pg
        if not pg.owned:
            return (f"the {pg.kind} database is not killpoint's to crash; "
                    "use --postgres local, docker or embedded for db-crash")
        return None

    def step_points(self, ctx: Context) -> dict[str, list[str]]:
        """Only the checkpoint points: a crash elsewhere is a worker's lost connection, not a lost commit."""
        return {st: [p for p in ps if p in POINTS] for st, ps in super().step_points(ctx).items()}

    def run(self, ctx: Context) -> list[Trial]:
        """A crash at each checkpoint point of each step."""
        return self.exhaustive(ctx)

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "10 crashes, 10 restarts"."""
        crashes = sum(1 for t in trials for f in t.evidence.faults() if f.get("action") == "db-crash")
        ups = sum(1 for t in trials for e in t.evidence.events if isinstance(e, DbUp))
        return f"{crashes} crashes, {ups} restarts"
