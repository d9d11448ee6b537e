"""Reports: the text a user reads and the run directory's JSON records (JUnit XML for CI: `report.junit`).

A failure always ends with its seed (or says its schedule was explicit, drawn from no seed), with the run's
base seed where there is one, the schedule and the one line that replays it.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Iterator
from pathlib import Path

from killpoint import __version__
from killpoint.report.causes import Group, from_trial, group
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


def trial_block(scenario: str, t: Trial, steps: str, title: str = "FAILED", base_seed: int | None = None,
                seed_text: str | None = None) -> list[str]:
    """The failure in full: checkers that failed with their evidence, seed (`seed_line`), schedule, replay
    line. `base_seed`: the base seed of the run the trial belongs to (`run`, `explore`), if any;
    `seed_text`: what the seed line says of a trial with no seed, when the caller knows better than
    "explicit" (a schedule Hypothesis drew)."""
    lines = [f"--- {title}: {scenario} run {t.run_id}"]
    for v in t.verdicts:
        if v.outcome in ("pass", "n/a"):
            continue
        lines.append(f"  {v.checker}: {v.outcome}: {v.reason}")
        lines.extend(f"      {e}" for e in v.evidence)
    lines.extend(f"  {line}" for line in crash_lines(t.evidence.crashes))
    lines.extend(f"  runtime: {note}" for note in t.evidence.notes)
    if t.unfired():
        lines.append(f"  not fired (the run never reached them): {', '.join(t.unfired())}")
    lines.append(f"  seed:     {seed_text if seed_text and t.seed is None else seed_line(t, base_seed)}")
    lines.append(f"  schedule: {t.schedule or NO_FAULT}")
    if t.shrunk_from is not None:
        n, m = len(t.shrunk_from), len(t.schedule)
        lines.append(f"  shrunk:   from {t.shrunk_from} ({n} faults) to {m} fault{'s' if m != 1 else ''}")
    lines.append(f"  replay:   {replay_line(scenario, t, steps)}")
    return lines


def failure_groups(results: list[ScenarioResult]) -> list[Group]:
    """The non-passing trials of `results` grouped by cause (`report.causes`), each scenario's real failures
    before its undecided ones, fewest faults first; a group's representative is a `Trial` (`ref`)."""
    findings = [from_trial(r.name, r.outcome, t) for r in results
                for t in sorted((t for t in r.trials if t.outcome not in ("pass", "n/a")),
                                key=lambda t: (t.outcome != "fail", len(t.schedule)))]
    return group(findings)


def failure_blocks(results: list[ScenarioResult], steps: str, base_seed: int | None, more: str,
                   per_scenario: int = 3) -> tuple[list[str], str | None]:
    """The failures as the CLI prints them, and the replay line of the first real failure (else of the first
    undecided one) of a failing scenario. One block per cause (`trial_block` of its representative, then
    where else it was met), at most `per_scenario` causes shown per scenario of their representative; the
    rest counted (`... and N more of SCENARIO: ` + `more`)."""
    out: list[str] = []
    shown: dict[str, int] = {}
    hidden: dict[str, int] = {}
    first: tuple[bool, str] | None = None  # (is a real failure, replay line)
    outcomes = {r.name: r.outcome for r in results}
    for g in failure_groups(results):
        rep = g.representative
        t: Trial = rep.ref  # type: ignore[assignment]
        if outcomes[rep.scenario] in ("fail", "unknown") and (first is None or (not first[0] and rep.outcome == "fail")):
            first = rep.outcome == "fail", replay_line(rep.scenario, t, steps)
        if shown.get(rep.scenario, 0) >= per_scenario:
            hidden[rep.scenario] = hidden.get(rep.scenario, 0) + len(g.members)
            continue
        shown[rep.scenario] = shown.get(rep.scenario, 0) + 1
        out.append("")
        out.extend(trial_block(rep.scenario, t, steps, rep.title, base_seed))
        also = g.also_line()
        if also:
            out.append(f"  {also}")
    for name, n in hidden.items():
        out.append(f"\n... and {n} more of {name}: {more}")
    return out, first[1] if first else None


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
                          ev.replay.adapter, ev.knobs.time_budget, exit_codes=ev.knobs.exit_codes,
                          allow_egress=ev.replay.allow_egress, skip_checkers=ev.replay.skip_checkers)


def write_run_dir(run_dir: Path, results: list[ScenarioResult], meta: dict) -> None:
    """meta.json (seed, versions, step module digest) and verdicts.json (every trial; a shrunk one names the
    schedule it was shrunk from, `shrunk_from`; one replayed from `.killpoint/failures` is `remembered`) in the
    run dir."""
    meta = {**meta, "killpoint": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    with (run_dir / "verdicts.json").open("w") as out:
        out.writelines(verdicts_json(results))


TRIALS = "\x00trials\x00"
"""Where a scenario's trials go in its `verdicts.json` object, written one by one (`verdicts_json`)."""


def verdicts_json(results: list[ScenarioResult]) -> Iterator[str]:
    """The text of `verdicts.json` (`json.dumps(..., indent=2)` of one object per scenario, its `trials` a list
    of `trial_record`), in pieces: one trial record is in memory at a time, however many a scenario has."""
    if not results:
        yield "[]"
        return
    for n, r in enumerate(results):
        head = json.dumps({"scenario": r.name, "outcome": r.outcome, "reason": r.reason, "cut": r.cut,
                           "elapsed": round(r.elapsed, 3), "trials": TRIALS if r.trials else []}, indent=2)
        before, _, after = head.partition(json.dumps(TRIALS))
        yield ("[" if n == 0 else ",") + _indented("\n" + before, 2)
        if r.trials:
            for i, t in enumerate(r.trials):
                yield ("[" if i == 0 else ",") + _indented("\n" + json.dumps(trial_record(t), indent=2), 6)
            yield "\n    ]" + _indented(after, 2)
    yield "\n]"


def _indented(text: str, by: int) -> str:
    """`text` with every line after a newline indented by `by` spaces."""
    return text.replace("\n", "\n" + " " * by)


def trial_record(t: Trial) -> dict:
    """A trial as `verdicts.json` lists it (a spooled trial's verdicts and notes read back, `Trial.written`)."""
    verdicts, notes = t.written()
    return {"run_id": t.run_id, "schedule": str(t.schedule), "seed": t.seed, "outcome": t.outcome,
            "verdicts": verdicts,
            **({"shrunk_from": str(t.shrunk_from)} if t.shrunk_from is not None else {}),
            **({"remembered": True} if t.remembered else {}),
            **({"notes": notes} if notes else {})}


def run_seed(meta: dict) -> int | None:
    """The base seed of a run, from its meta: `run` and `explore` draw their random schedules from one (a
    `replay`'s seed names one trial, and is in that trial's block already)."""
    return meta.get("seed") if meta.get("command") in ("run", "explore") else None
