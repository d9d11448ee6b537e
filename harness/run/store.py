"""The failure store: failing schedules remembered under `.killpoint/failures/`, replayed first next time
(like Hypothesis's example database).

1. A file per agent: `<module>-<digest>.json`, keyed by the step module and the SHA-256 of its source
   (`AgentSpec.digest`), so the failures of one version of an agent are replayed on that version. A
   black-box worker (`--worker-cmd`) is its own agent: `worker-<name>-<digest>.json`, named after the
   command's program (its last argument that names a file, e.g. `invoice_graph.py`) and keyed by the
   command, the adapter and the bytes of every file the command names (`Worker`), so two workers (a
   LangGraph graph and a DBOS workflow) never share their schedules. The file maps a scenario name to
   the schedules that failed in it.
2. Before a scenario runs, `replay` runs its stored schedules first (each with `Scenario.trial`, what
   `killpoint replay --schedule` runs) and says so; those trials count with the scenario's others, and the
   scenario's plans do not run them again (`Context.judged`, where a trial is a function of its schedule).
3. After it ran, `remember` stores the schedules that failed (the shrunk ones included) and drops stored
   ones that now pass, so a fixed bug leaves the store. A negative control's expected findings are never
   stored (they fail on purpose).
4. The file is written atomically (a temporary file renamed); an unreadable one is treated as empty, and
   so is anything but a regular file of at most `MAX_FILE_BYTES` (`read_bounded`: a FIFO or a device
   planted there is never read, so never hangs the run or fills its memory).
   `--no-store` (a `FailureStore` of None) turns all of it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from killpoint.env.stepmodule import AgentSpec
from killpoint.faults.schedule import Schedule, ScheduleError
from killpoint.run.bounded import read_bounded
from killpoint.run.plans import in_shard
from killpoint.run.scenario import Context, Scenario
from killpoint.run.trial import Trial

DEFAULT_ROOT = Path(".killpoint") / "failures"
MAX_PER_SCENARIO = 20
"""Stored schedules kept per scenario (the most recent failures)."""
@dataclass(frozen=True)
class Worker:
    """A black-box worker as the store keys it (flow step 1): its command and the adapter reading it; the
    step module it is run against (`AgentSpec`) only names its steps."""

    cmd: str
    adapter: str | None
    agent: AgentSpec

    @property
    def module(self) -> str:
        """`worker-<name>`: the command's program, after the last argument that names a file (else its first)."""
        try:
            argv = shlex.split(self.cmd)
        except ValueError:
            argv = self.cmd.split()
        files = [a for a in argv if "{" not in a and Path(a).is_file()]
        name = Path(files[-1] if files else (argv[0] if argv else "worker")).name
        return "worker-" + (re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "cmd")

    @property
    def digest(self) -> str:
        """SHA-256 (first 16 hex digits) of the command, the adapter and every file the command names."""
        h = hashlib.sha256(f"{self.cmd}\0{self.adapter or ''}".encode())
        try:
            argv = shlex.split(self.cmd)
        except ValueError:
            argv = self.cmd.split()
        for arg in argv:
            path = Path(arg)
            if "{" not in arg and path.is_file():
                h.update(b"\0" + path.read_bytes())
        return h.hexdigest()[:16]

    @property
    def steps(self) -> tuple[str, ...]:
        return self.agent.steps


Agent = AgentSpec | Worker


def agent_of(scenario: Scenario, ctx: Context) -> Agent:
    """What ran in `scenario`: the session's black-box worker if there is one, else the scenario's agent."""
    env = getattr(ctx.session, "env", None)
    if env is not None and getattr(env, "worker_cmd", None):
        return Worker(env.worker_cmd, env.adapter.name, scenario.agent(ctx))
    return scenario.agent(ctx)


class FailureStore:
    """Failing schedules per agent and scenario, in `root` (flow above)."""

    def __init__(self, root: Path = DEFAULT_ROOT) -> None:
        self.root = root

    def path(self, agent: Agent) -> Path:
        return self.root / f"{agent.module}-{agent.digest}.json"

    def read(self, agent: Agent) -> dict[str, list[str]]:
        raw = read_bounded(self.path(agent))
        try:
            data = json.loads(raw) if raw is not None else {}
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): [str(s) for s in v] for k, v in data.items() if isinstance(v, list)}

    def schedules(self, agent: Agent, scenario: str) -> list[Schedule]:
        """The stored failing schedules of `scenario` that still parse against the agent's steps."""
        out = []
        for text in self.read(agent).get(scenario, []):
            try:
                out.append(Schedule.parse(text, agent.steps))
            except ScheduleError:
                continue  # a step that no longer exists: nothing to replay
        return out

    def update(self, agent: Agent, scenario: str, failed: list[Schedule], passed: list[Schedule]) -> None:
        """Flow step 3: add `failed`, drop `passed`; write atomically (flow step 4)."""
        data = self.read(agent)
        gone = {str(s) for s in passed} - {str(s) for s in failed}
        kept = [s for s in data.get(scenario, []) if s not in gone]
        for s in failed:
            if str(s) and str(s) not in kept:
                kept.append(str(s))
        if kept:
            data[scenario] = kept[-MAX_PER_SCENARIO:]
        else:
            data.pop(scenario, None)
        if not data and not self.path(agent).exists():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".failures-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path(agent))


def replay(store: FailureStore | None, scenario: Scenario, ctx: Context) -> list[Trial]:
    """Flow step 2: the trials of the scenario's stored failing schedules, run first."""
    if store is None or scenario.expected_finding:
        return []
    # under --shard K/N a stored schedule is one more trial of the plan: one shard replays it, not all
    schedules = in_shard(scenario, ctx, store.schedules(agent_of(scenario, ctx), scenario.name), lambda s: (s, None),
                         local=True)
    trials = []
    for i, schedule in enumerate(schedules, 1):
        trial = scenario.trial(ctx, schedule)
        trial.remembered = True
        ctx.say(f"{scenario.name}: stored failure [{i}/{len(schedules)}] {schedule} -> {trial.outcome}")
        trials.append(trial)
    ctx.judged = ctx.judged | {str(t.schedule) for t in trials}  # not run again by the plans (`run_plan`)
    return trials


def remember(store: FailureStore | None, scenario: Scenario, ctx: Context, trials: list[Trial]) -> None:
    """Flow step 3 for a scenario's trials."""
    if store is None or scenario.expected_finding:
        return
    failed = [t.schedule for t in trials if t.outcome == "fail" and len(t.schedule)]
    passed = [t.schedule for t in trials if t.outcome == "pass"]
    store.update(agent_of(scenario, ctx), scenario.name, failed, passed)
