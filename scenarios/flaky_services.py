"""flaky-services: the services and the model misbehave the way real ones do, and the agent's retries
must keep the same idempotency keys so that every effect still happens once.

Faults, each at every step that reaches its point: `error` (5xx before applying, at effect.received and
model.request; after applying, at effect.applied: the ambiguous failure), `drop` (the effect applied, the
connection reset before the answer, at effect.applied), `slow` (latency), `overload` (the model answers 529;
at effect.applied, the service's overload answer after applying), `outage` (every request of the service
fails until the run is resumed: the client's retries run out and the error reaches the step). Then a few
random multi-fault schedules of them, whose outages last until the resume or one request longer than any
client's retries (`faults.outage.LENGTHS`).
Judged by every crash checker (exactly_once, bounded_rework and context_fidelity among them), plus
`retries_keep_keys`: every request the services saw carried a key the crash-free run used.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection

from killpoint.checkers import CRASH_CHECKERS
from killpoint.faults.outage import LENGTHS
from killpoint.faults.points import base
from killpoint.faults.schedule import DRAWS_SPARE, Schedule, distinct
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial

RANDOM_SCHEDULES = 4
MAX_FAULTS = 3
"""The most faults a random schedule holds."""


class FlakyServices(Scenario):
    name = "flaky-services"
    needs = ("service", "model")
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 7.2  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "5xx, dropped connections after applying, latency and model overload: retries keep their keys"
    checkers = (*CRASH_CHECKERS, "retries_keep_keys")
    actions = ("error", "drop", "slow", "overload", "outage")

    def run(self, ctx: Context) -> list[Trial]:
        return self.exhaustive(ctx) + self.random(ctx, min(ctx.random_count, RANDOM_SCHEDULES), stop_on_budget=True,
                                                  besides=self.sweep_plan(ctx))

    def random_actions(self, ctx: Context) -> list[str]:
        """The actions a seed draws from: the allowed ones, an `outage` as each of its lengths (`LENGTHS`)."""
        return [x for a in self.actions_in(ctx) for x in (LENGTHS if a == "outage" else (a,))]

    def seed_schedules(self, ctx: Context) -> Callable[[int], Schedule]:
        """What a seed stands for (`replay --seed`, `random_plan`): up to `MAX_FAULTS` of the random actions."""
        points, actions, occurrences = self.step_points(ctx), self.random_actions(ctx), self.occurrences(ctx)
        return lambda seed: Schedule.from_seed(seed, points, actions=actions, max_faults=MAX_FAULTS,
                                               occurrences=occurrences)

    def random_plan(self, ctx: Context, count: int, besides: Collection[Schedule] = ()) -> list[tuple[int, Schedule]]:
        """`count` random schedules of two faults or more (single faults are the exhaustive part's), none
        alike and none of `besides` (`faults.schedule.distinct`)."""
        return distinct(ctx.seed, count, self.seed_schedules(ctx),
                        keep=lambda schedule: len(schedule) > 1, besides=besides, most_draws=count * 8 + DRAWS_SPARE)

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "25 faults (drop 2, error 8, outage 4, overload 3, slow 8); 9 effect retries deduplicated"."""
        actions = Counter(base(str(f.get("action"))) for t in trials for f in t.evidence.faults())
        dedup = sum(1 for t in trials for a in t.evidence.attempts if a.get("outcome") == "deduplicated")
        kinds = ", ".join(f"{a} {n}" for a, n in sorted(actions.items()))
        return f"{sum(actions.values())} faults ({kinds}); {dedup} effect retries deduplicated"
