"""What a user's test suite calls: `expect` a trial or a scenario to pass, `explain` a failure, run a whole
scenario as a test, and write the session's run directory. The pytest plugin (`killpoint.plugin`) is a thin
layer over this module; nothing here needs pytest except `expect` on a skipped scenario.

1. `expect(trial)` returns when the trial passed; otherwise it raises `TrialFailed` (an AssertionError)
   whose message is the block the CLI prints: each checker that did not pass with its evidence, the
   tracebacks of workers that died, the seed, the schedule, the replay line, and the run directory.
2. `expect(result)` does the same for a `ScenarioResult`: `pass` and a negative control's `expected`
   return, `skipped` skips the test (with the scenario's reason), anything else raises with the
   scenario's line and the first failing trials in full.
3. `run_scenario(session, name)` runs a registered scenario on a session the way `killpoint run` does
   (skip check, its trials, the shrunk failure) and returns its `ScenarioResult`.
4. `write_session(session, results)` writes `meta.json` and `verdicts.json` in the session's run directory:
   the scenarios run whole, and every other trial grouped under the scenario its run id names, so
   `killpoint report` and `killpoint judge` read a pytest session like a CLI run.
5. pytest shows the finding first: `expect` and its helpers hide their own frames (`__tracebackhide__`), a
   trial's `failing()` list shows `summary(trial)` (the checkers that did not pass, the replay line) in
   `assert trial.outcome == "pass", trial.failing()` (`explain(trial)` gives the whole block), and a schedule Hypothesis drew
   (no seed, not written by the user, inside a `@given` test) says so in its seed line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from killpoint.checkers.verdict import combine
from killpoint.run.scenario import Context, ScenarioResult, find
from killpoint.run.shrinking import with_shrunk
from killpoint.run.trial import Failing, Session, Trial

SHOWN = 3
"""Failing trials of a scenario shown in full in an assertion message."""

DEFAULT_SCENARIO = "crash-points"
"""The scenario a bare `Session.trial` replays under: the crash checkers on the session's agent."""


class TrialFailed(AssertionError):
    """A trial or scenario did not pass; the message is the whole failure block, `lines` its lines."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def scenario_of(trial: Trial) -> str:
    """The scenario a trial belongs to: the prefix of its run id (`crash-points-3`), or the default one
    for a trial a test asked the session for directly (`run-3`)."""
    prefix = trial.run_id.rpartition("-")[0]
    return DEFAULT_SCENARIO if prefix in ("", "run") else prefix


HYPOTHESIS_DRAWN = "none (drawn by Hypothesis, not from a seed: the schedule below replays it)"
"""The seed line of a schedule a Hypothesis test drew (flow step 5)."""


def drawn_by_hypothesis(trial: Trial) -> bool:
    """Flow step 5: `trial`'s schedule was drawn by Hypothesis: no seed, not written by the user
    (`Session.trial(..., explicit=False)`), and it is judged inside a running Hypothesis test."""
    if trial.seed is not None or not len(trial.schedule) or trial.evidence.replay.explicit:
        return False
    if "hypothesis" not in sys.modules:
        return False
    from hypothesis.control import currently_in_test_context

    return currently_in_test_context()


def explain(trial: Trial, scenario: str | None = None) -> str:
    """The failure block of `trial` (see the flow above), with its run directory; for any outcome."""
    __tracebackhide__ = True  # noqa: F841  (pytest: the finding first, not killpoint's source)
    from killpoint.env.stepmodule import DEFAULT_STEPS
    from killpoint.report.text import trial_block

    title = "FAILED" if trial.outcome == "fail" else trial.outcome.upper()
    lines = trial_block(scenario or scenario_of(trial), trial, trial.steps or DEFAULT_STEPS, title,
                        seed_text=HYPOTHESIS_DRAWN if drawn_by_hypothesis(trial) else None)
    if trial.run_dir is not None:
        lines.append(f"  run dir:  {trial.run_dir} (history.jsonl, worker logs; killpoint report {trial.run_dir})")
    return "\n".join(lines)


def summary(trial: Trial, scenario: str | None = None) -> str:
    """Flow step 5: the finding in two lines, short enough for pytest to show whole in an assertion message
    (it cuts an object's repr at 240 characters): the outcome, scenario, run and checkers that did not pass,
    then the replay line (which names the schedule). `explain` gives the evidence."""
    from killpoint.env.stepmodule import DEFAULT_STEPS
    from killpoint.report.text import replay_line

    name = scenario or scenario_of(trial)
    bad = [v.checker for v in trial.verdicts if v.outcome not in ("pass", "n/a")]
    return (f"{trial.outcome.upper()}: {name} run {trial.run_id}: {', '.join(bad) or 'no checker decided'}\n"
            f"  replay: {replay_line(name, trial, trial.steps or DEFAULT_STEPS)}")


Failing.shown_by = summary  # flow step 5: `trial.failing()` reads as the finding


def expect(result: Trial | ScenarioResult, scenario: str | None = None) -> None:
    """Return if `result` passed; raise `TrialFailed` with the failure block otherwise (flow steps 1-2)."""
    __tracebackhide__ = True  # noqa: F841  (pytest: the finding first, not killpoint's source)
    if isinstance(result, Trial):
        if result.outcome != "pass":
            raise TrialFailed(explain(result, scenario).splitlines())
        return
    if result.outcome in ("pass", "expected"):
        return
    if result.outcome == "skipped":
        import pytest

        pytest.skip(f"{result.name}: {result.reason}")
    from killpoint.report.text import scenario_line

    lines = [scenario_line(result)]
    bad = sorted((t for t in result.trials if t.outcome != "pass"), key=lambda t: len(t.schedule))
    for t in bad[:SHOWN]:
        lines += ["", *explain(t, result.name).splitlines()]
    if len(bad) > SHOWN:
        lines.append(f"... and {len(bad) - SHOWN} more: {bad[0].run_dir}/verdicts.json at the session's end")
    raise TrialFailed(lines)


def run_scenario(session: Session, name: str, *, seed: int = 0, budget: float = 60.0, random_count: int = 8,
                 say: Callable[[str], None] | None = None) -> ScenarioResult:
    """Run the registered scenario `name` on `session` as `killpoint run --scenario NAME` does (flow step 3)."""
    scenario = find(name)
    started = time.monotonic()
    ctx = Context(session=session, seed=seed, budget=budget, random_count=random_count, named=(name,),
                  **({"say": say} if say is not None else {}))
    skipped = scenario.skipped(ctx, started)
    if skipped is not None:
        return skipped
    return scenario.result(with_shrunk(scenario, ctx, scenario.run(ctx)), started)


def write_session(session: Session, results: Iterable[ScenarioResult] = (), meta: dict | None = None) -> Path:
    """`meta.json` and `verdicts.json` of a session's run directory (flow step 4); returns the directory."""
    from killpoint.report.text import write_run_dir

    results = list(results)
    covered = {id(t) for r in results for t in r.trials}
    loose: dict[str, list[Trial]] = {}
    for t in session.trials:
        if id(t) not in covered:
            loose.setdefault(scenario_of(t), []).append(t)
    for name, trials in loose.items():
        outcome = combine([v for t in trials for v in t.verdicts]) if trials else "unknown"
        results.append(ScenarioResult(name, outcome, trials, 0.0))
    run_dir = session.env.run_dir
    write_run_dir(run_dir, results, {**(meta or {}), "steps": session.agent.module,
                                      "steps_digest": session.agent.digest, "grace": session.options.grace,
                                      "run_timeout": session.options.time_budget})
    return run_dir
