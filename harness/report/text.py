"""Reports: the text a user reads, JUnit XML for CI, and the run directory's JSON records.

A failure always ends with its seed (or says its schedule was explicit, drawn from no seed), with the run's
base seed where there is one, the schedule and the one line that replays it.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from killpoint import __version__
from killpoint.run.scenario import ScenarioResult, replay_command
from killpoint.run.trial import Trial, crash_lines

MARK = {"pass": "PASS", "fail": "FAIL", "unknown": "UNKNOWN", "expected": "EXPECTED", "skipped": "SKIP", "error": "ERROR",
        "interrupted": "STOPPED"}


def scenario_line(r: ScenarioResult) -> str:
    """One line per scenario: outcome, name, schedules tried, time, figures."""
    figures = f"  {r.figures}" if r.figures else ""
    reason = f"  ({r.reason})" if r.reason else ""
    cut = f"  [{r.cut}]" if r.cut else ""
    return f"{MARK[r.outcome]:<8} {r.name:<26} {len(r.trials):>4} schedules {r.elapsed:7.1f}s{figures}{reason}{cut}"


NO_FAULT = "(none: no fault injected)"
"""An empty schedule's line: a crash-free run, or one that only resumed a checkpoint (stored-checkpoints)."""


def trial_block(scenario: str, t: Trial, steps: str, title: str = "FAILED", base_seed: int | None = None) -> list[str]:
    """The failure in full: checkers that failed with their evidence, seed (`seed_line`), schedule, replay
    line. `base_seed`: the base seed of the run the trial belongs to (`run`, `explore`), if any."""
    lines = [f"--- {title}: {scenario} run {t.run_id}"]
    for v in t.verdicts:
        if v.outcome in ("pass", "n/a"):
            continue
        lines.append(f"  {v.checker}: {v.outcome}: {v.reason}")
        lines.extend(f"      {e}" for e in v.evidence)
    lines.extend(f"  {line}" for line in crash_lines(t.evidence.crashes))
    if t.unfired():
        lines.append(f"  not fired (the run never reached them): {', '.join(t.unfired())}")
    lines.append(f"  seed:     {seed_line(t, base_seed)}")
    lines.append(f"  schedule: {t.schedule or NO_FAULT}")
    if t.shrunk_from is not None:
        n, m = len(t.shrunk_from), len(t.schedule)
        lines.append(f"  shrunk:   from {t.shrunk_from} ({n} faults) to {m} fault{'s' if m != 1 else ''}")
    lines.append(f"  replay:   {replay_line(scenario, t, steps)}")
    return lines


def seed_line(t: Trial, base_seed: int | None = None) -> str:
    """The trial's seed, or that its schedule was explicit (enumerated or given, drawn from no seed); then the
    run's base seed, if any, which `--seed` takes to repeat the whole run."""
    own = str(t.seed) if t.seed is not None else "none (an explicit schedule, drawn from no seed)"
    return own if base_seed is None else f"{own}; base seed of the run {base_seed} (--seed {base_seed} repeats it)"


def replay_line(scenario: str, t: Trial, steps: str) -> str:
    """The replay line: by schedule, or by seed when the seed alone names the trial (empty schedule)."""
    by_seed = not t.schedule and t.seed is not None
    ev = t.evidence
    return replay_command(scenario, None if by_seed else t.schedule, t.seed, steps, ev.knobs.grace,
                          ev.extra.get("previous_steps"), ev.replay.worker_cmd, ev.replay.effects,
                          ev.replay.adapter)


def write_run_dir(run_dir: Path, results: list[ScenarioResult], meta: dict) -> None:
    """meta.json (seed, versions, step module digest) and verdicts.json (every trial) in the run dir."""
    meta = {**meta, "killpoint": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    verdicts = [{"scenario": r.name, "outcome": r.outcome, "reason": r.reason, "cut": r.cut,
                 "elapsed": round(r.elapsed, 3),
                 "trials": [{"run_id": t.run_id, "schedule": str(t.schedule), "seed": t.seed, "outcome": t.outcome,
                             "verdicts": [v.to_dict() for v in t.verdicts]} for t in r.trials]}
                for r in results]
    (run_dir / "verdicts.json").write_text(json.dumps(verdicts, indent=2))


def trial_seconds(t: Trial) -> float:
    """How long a trial's run took: from its first recorded event to its last (0.0 without events)."""
    times = [e["t"] for e in t.evidence.events if isinstance(e.get("t"), (int, float))]
    return max(times) - min(times) if times else 0.0


def testcase_names(trials: list[Trial]) -> list[str]:
    """A unique name per trial of one scenario: the schedule (`crash-free` for none), with its seed when a
    seed generated it, and its run id when that is still not unique (a fleet's runs, a repeated schedule)."""
    base = [(str(t.schedule) or "crash-free") + (f" (seed {t.seed})" if t.seed is not None else "") for t in trials]
    return [f"{b} [{t.run_id}]" if base.count(b) > 1 else b for b, t in zip(base, trials, strict=True)]


def run_seed(meta: dict) -> int | None:
    """The base seed of a run, from its meta: `run` and `explore` draw their random schedules from one (a
    `replay`'s seed names one trial, and is in that trial's block already)."""
    return meta.get("seed") if meta.get("command") in ("run", "explore") else None


def junit_xml(results: list[ScenarioResult], steps: str, meta: dict | None = None) -> str:
    """One testsuite per scenario, one testcase per trial (unique names, a time each); a failing trial carries
    its block and replay line; a negative control's expected finding is a passing case marked as such; each
    suite carries the seed, killpoint's version and the step module's digest as properties."""
    meta = meta or {}
    base = run_seed(meta)
    props = {"killpoint.version": __version__, "killpoint.steps": steps, "killpoint.seed": meta.get("seed"),
             "killpoint.steps_digest": meta.get("steps_digest")}
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>"]
    for r in results:
        fails = sum(1 for t in r.trials if t.outcome == "fail" and r.outcome != "expected")
        out.append(f'  <testsuite name={quoteattr(r.name)} tests="{max(len(r.trials), 1)}" failures="{fails}" '
                   f'time="{r.elapsed:.3f}">')
        out.append("    <properties>")
        out.extend(f"      <property name={quoteattr(k)} value={quoteattr(str(v))}/>" for k, v in props.items()
                   if v is not None)
        if r.outcome == "expected":
            out.append('      <property name="killpoint.negative_control" value="expected finding produced"/>')
        if r.cut:  # what the time budget left out of the random part (never the exhaustive part)
            out.append(f'      <property name="killpoint.budget_cut" value={quoteattr(r.cut)}/>')
        out.append("    </properties>")
        if r.outcome == "skipped":
            out.append(f'    <testcase classname={quoteattr(r.name)} name="{escape(r.name)}">'
                       f'<skipped message={quoteattr(r.reason)}/></testcase>')
        if r.outcome in ("error", "interrupted") or (r.outcome == "fail" and not r.trials):
            out.append(f'    <testcase classname={quoteattr(r.name)} name="{escape(r.name)}">'
                       f'<error message={quoteattr(r.reason or r.outcome)}/></testcase>')
        for t, name in zip(r.trials, testcase_names(r.trials), strict=True):
            out.append(f"    <testcase classname={quoteattr(r.name)} name={quoteattr(name)} "
                       f'time="{trial_seconds(t):.3f}">')
            if t.outcome == "fail" and r.outcome == "expected":
                body = escape("\n".join(trial_block(r.name, t, steps, "EXPECTED FINDING (negative control)", base)))
                out.append('      <properties><property name="killpoint.expected_finding" value="true"/></properties>')
                out.append(f"      <system-out>{body}</system-out>")
            elif t.outcome == "fail":
                body = escape("\n".join(trial_block(r.name, t, steps, base_seed=base)))
                first = t.failing()[0]
                out.append(f"      <failure message={quoteattr(first.checker + ': ' + first.reason)}>{body}</failure>")
            elif t.outcome == "unknown":
                body = escape("\n".join(trial_block(r.name, t, steps, "UNKNOWN", base)))
                out.append(f'      <error message="unknown: the checkers could not decide">{body}</error>')
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
