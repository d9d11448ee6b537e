"""zombie-worker: a worker frozen mid-step comes back after another worker has moved the run on.

At every kill point of every step, worker A is frozen (SIGSTOP), its lease is expired (the passage of
time), a successor B takes the run and moves it on, and A is thawed (SIGCONT). A must be fenced: its
checkpoint writes refused by the monotonic guard (exit 4) or its lease found lost (exit 5), and it
must stop without another effect. Judged by every crash checker (fenced_zombie, no_rewind and
exactly_once among them).

A worker frozen inside its checkpoint transaction (checkpoint.writing) holds the row lock: its successor
waits on it, so the zombie is thawed then (see the nemesis), commits first, and the successor's write is
the one refused; the zombie then finds its lease taken and stops (exit 5).
"""

from __future__ import annotations

from collections import Counter

from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial

RANDOM_SCHEDULES = 4
_HOW = {0: "finished the run itself", 3: "refused", 4: "fenced", 5: "lease lost"}


class ZombieWorker(Scenario):
    name = "zombie-worker"
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 9.9  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "SIGSTOP a worker at every point, let a successor take over, thaw it: it must be fenced"
    actions = ("stop",)

    def run(self, ctx: Context) -> list[Trial]:
        """A freeze at every point of every step, then a few random schedules of nested freezes."""
        return self.exhaustive(ctx) + self.random(ctx, min(ctx.random_count, RANDOM_SCHEDULES), stop_on_budget=True,
                                                  besides=self.sweep_plan(ctx))

    def figures(self, trials: list[Trial]) -> str:
        """How the thawed zombies ended, e.g. "23 zombies: 20 fenced (exit 4), 3 lease lost (exit 5)"."""
        ends: Counter = Counter()
        for t in trials:
            zombies = {f.get("inc") for f in t.evidence.faults() if f.get("action") == "stop"}
            for i in t.evidence.incarnations:
                if i.get("inc") in zombies:
                    code = i.get("exit_code")
                    ends[f"{_HOW.get(code, 'exit')} (exit {code})" if i.get("signal") is None
                         else f"signal {i.get('signal')}"] += 1
        parts = [f"{n} {how}" for how, n in sorted(ends.items())]
        return f"{sum(ends.values())} zombies: {', '.join(parts)}" if parts else ""
