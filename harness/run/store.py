"""The failure store: failing schedules remembered under `.killpoint/failures/`, replayed first next time
(like Hypothesis's example database).

1. A file per agent: `<module>-<digest>.json`, keyed by the step module and the SHA-256 of its source
   (`AgentSpec.digest`), so the failures of one version of an agent are replayed on that version. The
   file maps a scenario name to the schedules that failed in it.
2. Before a scenario runs, `replay` runs its stored schedules first (each with `Scenario.trial`, what
   `killpoint replay --schedule` runs) and says so; those trials count with the scenario's others.
3. After it ran, `remember` stores the schedules that failed (the shrunk ones included) and drops stored
   ones that now pass, so a fixed bug leaves the store. A negative control's expected findings are never
   stored (they fail on purpose).
4. The file is written atomically (a temporary file renamed); an unreadable one is treated as empty, and
   so is anything but a regular file of at most `MAX_FILE_BYTES` (`read_bounded`: a FIFO or a device
   planted there is never read, so never hangs the run or fills its memory).
   `--no-store` (a `FailureStore` of None) turns all of it off.
"""

from __future__ import annotations

import json
import os
import tempfile
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
class FailureStore:
    """Failing schedules per agent and scenario, in `root` (flow above)."""

    def __init__(self, root: Path = DEFAULT_ROOT) -> None:
        self.root = root

    def path(self, agent: AgentSpec) -> Path:
        return self.root / f"{agent.module}-{agent.digest}.json"

    def read(self, agent: AgentSpec) -> dict[str, list[str]]:
        raw = read_bounded(self.path(agent))
        try:
            data = json.loads(raw) if raw is not None else {}
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): [str(s) for s in v] for k, v in data.items() if isinstance(v, list)}

    def schedules(self, agent: AgentSpec, scenario: str) -> list[Schedule]:
        """The stored failing schedules of `scenario` that still parse against the agent's steps."""
        out = []
        for text in self.read(agent).get(scenario, []):
            try:
                out.append(Schedule.parse(text, agent.steps))
            except ScheduleError:
                continue  # a step that no longer exists: nothing to replay
        return out

    def update(self, agent: AgentSpec, scenario: str, failed: list[Schedule], passed: list[Schedule]) -> None:
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
    schedules = in_shard(scenario, ctx, store.schedules(scenario.agent(ctx), scenario.name), lambda s: (s, None))
    trials = []
    for i, schedule in enumerate(schedules, 1):
        trial = scenario.trial(ctx, schedule)
        trial.remembered = True
        ctx.say(f"{scenario.name}: stored failure [{i}/{len(schedules)}] {schedule} -> {trial.outcome}")
        trials.append(trial)
    return trials


def remember(store: FailureStore | None, scenario: Scenario, ctx: Context, trials: list[Trial]) -> None:
    """Flow step 3 for a scenario's trials."""
    if store is None or scenario.expected_finding:
        return
    failed = [t.schedule for t in trials if t.outcome == "fail" and len(t.schedule)]
    passed = [t.schedule for t in trials if t.outcome == "pass"]
    store.update(scenario.agent(ctx), scenario.name, failed, passed)
