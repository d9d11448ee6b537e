"""One trial: a run of the agent under one schedule, judged against the crash-free baseline.

`Session` holds what trials share (the environment, the history, the loaded agent, the cached
baselines) and hands out deterministic run ids, so the same session replayed gives the same trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import psycopg

from killpoint.checkers import CRASH_CHECKERS, Evidence, Verdict, combine, run_checkers
from killpoint.checkers.verdict import Outcome
from killpoint.run.controller import RunController
from killpoint.env.environment import Environment
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.faults.schedule import Schedule
from killpoint.env.stepmodule import AgentSpec

Setup = Callable[[psycopg.Connection, str], dict | None]
"""Prepares the database before a trial's first incarnation (e.g. seeds an old checkpoint); may
return extra options for the checkers."""


@dataclass
class Trial:
    """The outcome of one trial."""

    run_id: str
    schedule: Schedule
    seed: int | None
    evidence: Evidence
    verdicts: list[Verdict]
    outcome: Outcome = field(init=False)

    def __post_init__(self) -> None:
        self.outcome = combine(self.verdicts)

    def failing(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.outcome == "fail"]

    def unfired(self) -> list[str]:
        """Faults of the schedule the run never reached (nothing was injected for them)."""
        return [u for e in self.evidence.events if e["type"] == "run.end" for u in e.get("unfired") or []]


class Session:
    """Shared state of the trials of one harness invocation."""

    def __init__(self, env: Environment, history: History, agent: AgentSpec, options: RunOptions) -> None:
        self.env = env
        self.history = history
        self.agent = agent
        self.options = options
        self._baselines: dict[str, Evidence] = {}
        self._counter = 0

    def next_run_id(self, prefix: str) -> str:
        """`prefix-N`, N counting this session's runs. On a database that already saw that id (a `--dsn`
        database kept from an earlier invocation) N moves on, so a run never resumes another's checkpoint."""
        self._counter += 1
        with self.env.connect() as conn:
            while conn.execute("SELECT 1 FROM killpoint_audit WHERE run_id = %s LIMIT 1",
                               (f"{prefix}-{self._counter}",)).fetchone():
                self._counter += 1
        return f"{prefix}-{self._counter}"

    def drive(self, run_id: str, schedule: Schedule, options: RunOptions, setup: Setup | None = None,
              agent: AgentSpec | None = None, argv: list[str] | None = None) -> tuple[RunController, dict]:
        """Run one run to its end and return its controller and the setup's extra options."""
        agent = agent or self.agent
        extra: dict = {}
        if setup is not None:
            with self.env.connect() as conn:
                extra = setup(conn, run_id) or {}
        ctl = RunController(self.env, self.history, run_id, schedule, options, agent.module, argv)
        self.env.attach(ctl)
        try:
            ctl.run()
        finally:
            self.env.detach(ctl)
        return ctl, extra

    def baseline(self, options: RunOptions | None = None, agent: AgentSpec | None = None) -> Evidence:
        """The crash-free run of the agent with these parameters (run once per session, then cached)."""
        options = options or self.options
        agent = agent or self.agent
        key = json.dumps([agent.module, options.params], sort_keys=True)
        if key not in self._baselines:
            ctl, _ = self.drive(self.next_run_id("baseline"), Schedule(), replace(options, step_delay=0.0),
                                agent=agent)
            self._baselines[key] = ctl.evidence(agent.own_effects_sql)
        return self._baselines[key]

    def trial(self, schedule: Schedule, *, prefix: str = "run", seed: int | None = None,
              options: RunOptions | None = None, checkers: Iterable[str] = CRASH_CHECKERS,
              setup: Setup | None = None, agent: AgentSpec | None = None,
              baseline: Evidence | None = None) -> Trial:
        """Run `schedule` and judge it with `checkers` against the baseline."""
        options = options or self.options
        agent = agent or self.agent
        base = baseline if baseline is not None else self.baseline(options, agent)
        run_id = self.next_run_id(prefix)
        ctl, extra = self.drive(run_id, schedule, options, setup, agent)
        return self.judge(run_id, schedule, seed, ctl.evidence(agent.own_effects_sql, extra), base, checkers)

    def judge(self, run_id: str, schedule: Schedule, seed: int | None, ev: Evidence, base: Evidence | None,
              checkers: Iterable[str], more: Iterable[Verdict] = ()) -> Trial:
        """Judge a run's evidence with `checkers` (plus verdicts `more` a scenario reached itself) and
        record the outcome: for scenarios that drive a run their own way (several drives, own evidence)."""
        trial = Trial(run_id, schedule, seed, ev, run_checkers(checkers, ev, base) + list(more))
        self.history.append("verdict", run_id=run_id, outcome=trial.outcome,
                            failing=[v.checker for v in trial.failing()])
        return trial


def step_points(base: Evidence) -> dict[str, list[str]]:
    """For each step, the kill points it reached in the crash-free run, in the order first reached."""
    out: dict[str, list[str]] = {}
    for e in base.events:
        if e["type"] == "point" and e.get("step"):
            points = out.setdefault(e["step"], [])
            if e["point"] not in points:
                points.append(e["point"])
    return out
