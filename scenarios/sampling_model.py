"""sampling-model: the model answers a repeated request differently, as a real one samples; a decision must be
checkpointed before the effect it gates.

Every trial's run has a sampling model (`fake_services/sampling.py`): the first answer to each request is
the crash-free run's, a repeat (a step resumed after a crash asking again) is re-drawn with the other
verdict, from a seed that is a digest of the trial's schedule (so its replay line hears the same answers).
The faults: a kill at each point of each step that asks the model, then random multi-fault schedules of
kills.

A run whose model changed its mind legitimately ends elsewhere than the crash-free run (another verdict,
another template), so it is judged against the *counterfactual*: a crash-free run whose model is pinned to
the answers the faulted run ended with (same requests, same final answers). A run that heard no different
answer is judged against the crash-free run as usual. Checkers: every crash checker, and `decisions_hold`
(no effect made on an answer the run then asked again and replaced: the charge made although the state
says "review").
"""

from __future__ import annotations

import zlib
from typing import Any

import psycopg

from killpoint.checkers import CRASH_CHECKERS
from killpoint.checkers.evidence import Evidence
from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial


def sampling_seed(schedule: Schedule) -> int:
    """The sampling model's seed of a trial: a digest of its schedule, so that the replay line (which names
    the schedule) hears the same answers, whether the trial was drawn from a seed or written."""
    return zlib.crc32(str(schedule).encode())


def final_answers(ev: Evidence) -> dict[str, str]:
    """Request digest -> the last applied answer, for each request the model answered differently."""
    texts: dict[str, list[str]] = {}
    for r in sorted(ev.model_requests, key=lambda r: r.get("order") or 0):
        if r.get("outcome") == "applied" and r.get("response_text") is not None:
            texts.setdefault(r["request_digest"], []).append(r["response_text"])
    return {d: t[-1] for d, t in texts.items() if len(set(t)) > 1}


class SamplingModel(Scenario):
    name = "sampling-model"
    needs = ("model",)
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 6.9  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "a model that answers a resumed step differently: decisions checkpointed before their effects"
    checkers = (*CRASH_CHECKERS, "decisions_hold")
    actions = ("kill",)

    def step_points(self, ctx: Context) -> dict[str, list[str]]:
        """The points of the steps that ask the model (elsewhere a sampling model changes nothing)."""
        points = super().step_points(ctx)
        asking = {s: ps for s, ps in points.items() if "model.request" in ps}
        return asking or points

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None, run_id: str | None = None) -> Trial:
        session, agent = ctx.session, self.agent(ctx)
        options = self.options(session.options)
        session.check_steps(schedule, agent)
        base = session.baseline(options, agent)
        run_id = run_id or session.next_run_id(self.name)
        sample = sampling_seed(schedule)
        services = session.env.services

        def sampled(_conn: psycopg.Connection, rid: str) -> dict[str, Any]:
            services.sample(rid, sample)
            return {"sampling_seed": sample}

        ctl, extra = session.drive(run_id, schedule, options, sampled, agent)
        extra.update(session.replay_flags(schedule, ctx.explicit))  # the replay line runs the same worker
        ev = ctl.evidence(agent.own_effects_sql, extra)
        answers = final_answers(ev)
        judge_by = self.counterfactual(ctx, run_id, answers, base) if answers else base
        trial = session.judge(run_id, schedule, seed, ev, judge_by, self.checkers)
        trial.steps, trial.run_dir = agent.module, session.env.run_dir
        return trial

    def concurrent(self) -> bool:
        """Its trials run side by side under `-j`: each is runs of its own ids (the sampled answers and the
        pinned ones are keyed by run id in the fake model), and a counterfactual's id is its trial's."""
        return True

    def counterfactual(self, ctx: Context, run_id: str, answers: dict[str, str], base: Evidence) -> Evidence:
        """A crash-free run whose model answers these requests with these texts: what a run that heard the
        faulted run's final answers from the start ends as (with the crash-free run's volatile fields). Its
        id is `<run_id>-counterfactual`: named by the trial, not by the order in which trials ran."""
        session, agent = ctx.session, self.agent(ctx)
        options = self.options(session.options)
        services = session.env.services

        def pinned(_conn: psycopg.Connection, rid: str) -> dict[str, Any]:
            services.pin_answers(rid, answers)
            return {"pinned_answers": len(answers), "volatile": sorted(base.volatile)}

        ctl, extra = session.drive(f"{run_id}-counterfactual", Schedule(), options, pinned, agent)
        return ctl.evidence(agent.own_effects_sql, extra)

    def figures(self, trials: list[Trial]) -> str:
        """E.g. "9 runs, 4 heard another answer on resume"."""
        changed = sum(1 for t in trials if final_answers(t.evidence))
        return f"{len(trials)} runs, {changed} heard another answer on resume"
