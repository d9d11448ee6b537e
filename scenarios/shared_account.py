"""shared-account: one customer billed month after month from one provider account, whose idempotency keys
outlive a run, as Stripe's and every payment API's do.

The fakes keep idempotency keys per provider account (`fake_services/journal.py`); a run is an account of
its own unless a scenario shares one. Here the runs of one *cycle* share it: the same customer (account
and email) gets one invoice a month, `MONTHS` runs one after another, the first two for the same amount
and the last for another. A key built from the run (the reference agent's `run_id:step`) or from the
invoice is new each month; a key built from the customer (`<account>:charge`) is not, so next month's
charge is replayed instead of made (`exactly_once`: "missing x1: ledger") and the month with another
amount is refused 422 `idempotency_error` (the run cannot finish: `completes`, with the agent's traceback).

Each run of the cycle runs under the cycle's schedule (one fault from the seed, at any step; the bug shows
with or without it) and is judged by every crash checker against the crash-free run of the same invoice,
made in an account of its own. `replay --seed N` or `--schedule S` drives a whole cycle again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from killpoint.faults.schedule import Schedule, derive_seed, distinct
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial, TrialSpec

MONTHS: tuple[dict, ...] = (
    {"invoice_id": "INV-2026-01", "amount_cents": 12_500},
    {"invoice_id": "INV-2026-02", "amount_cents": 12_500},
    {"invoice_id": "INV-2026-03", "amount_cents": 9_900},
)
"""The invoices of one cycle, in order: an identical amount repeated, then another amount."""

ACCOUNT = "merchant-1"
"""The provider account (the merchant's API account) every run of a cycle bills from."""


class SharedAccount(Scenario):
    name = "shared-account"
    needs = ("service",)
    cost = 1.6  # seconds, reference agent, -j 1 (bench/shards.py)
    whole = True  # one cycle by default, one trial: --shard places it whole
    summary = "one customer invoiced month after month from one provider account: keys must not outlive a run"
    black_box_reason = ("each month's invoice reaches the agent as KILLPOINT_PARAMS through a step module's "
                        "initial_state, which a --worker-cmd may not read")
    actions = ("kill",)
    cycles_per_run = 1

    def seed_schedules(self, ctx: Context) -> Callable[[int], Schedule]:
        """One kill at a point of the seed's choosing (the cycle's schedule: every month runs under it)."""
        points, actions = self.step_points(ctx), self.actions_in(ctx)
        return lambda seed: Schedule.from_seed(seed, points, actions=actions, max_faults=1)

    def random_plan(self, ctx: Context, count: int, besides: Collection[Schedule] = ()) -> list[tuple[int, Schedule]]:
        """`count` cycles' schedules, none alike (`faults.schedule.distinct`: one kill each, so an agent has
        as many as it has points a kill fits)."""
        return distinct(ctx.seed, count, self.seed_schedules(ctx), besides=besides)

    def run(self, ctx: Context) -> list[Trial]:
        trials: list[Trial] = []
        for i in range(self.cycles_per_run):
            seed = ctx.seed if i == 0 else derive_seed(ctx.seed, i)
            schedule = self.schedule_from_seed(ctx, seed)
            ctx.say(f"{self.name}: seed {seed} -> schedule {schedule}, {len(MONTHS)} invoices in account {ACCOUNT}")
            if in_shard(self, ctx, [(seed, schedule)], lambda item: (item[1], item[0])):  # --shard: a cycle is one trial
                trials += self.cycle(ctx, schedule, seed)
        return trials

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None, run_id: str | None = None) -> Trial:
        """A whole cycle under `schedule` (with a seed: the seed's schedule); its first failing run (else its
        last) stands for it."""
        if seed is not None:
            schedule = self.schedule_from_seed(ctx, seed)
        trials = self.cycle(ctx, schedule, seed)
        return next((t for t in trials if t.outcome != "pass"), trials[-1])

    def cycle(self, ctx: Context, schedule: Schedule, seed: int | None) -> list[Trial]:
        """`MONTHS` runs of one customer in one provider account, one after another, each judged against the
        crash-free run of its own invoice (made in an account of its own)."""
        session, agent = ctx.session, self.agent(ctx)
        base_options = self.options(session.options)
        run_ids = [session.next_run_id(self.name) for _ in MONTHS]
        session.env.services.share_account(f"{ACCOUNT}.{run_ids[0]}", run_ids)
        trials = []
        for run_id, month in zip(run_ids, MONTHS, strict=True):
            options = replace(base_options, params={**base_options.params, **month})
            spec = TrialSpec(options, self.checkers, self.setup(), agent)
            trial = session.trial(schedule, spec, prefix=self.name, seed=seed, explicit=ctx.explicit, run_id=run_id)
            ctx.say(f"{self.name}: {month['invoice_id']} ({month['amount_cents']} cents) {schedule} -> {trial.outcome}")
            trials.append(trial)
        return trials

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "3 runs, 0 keys replayed from another run"."""
        replayed = sum(1 for t in trials for a in t.evidence.attempts
                       if a.get("outcome") == "deduplicated" and a.get("run_id") == t.run_id
                       and not any(e.get("id") == a.get("effect_id") for e in t.evidence.effects))
        return f"{len(trials)} runs, {replayed} keys replayed from another run"
