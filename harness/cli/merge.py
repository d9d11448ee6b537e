"""`killpoint merge DIR... [--out DIR] [--junit FILE]`: one run directory, one JUnit file and one HTML
report from several run directories, typically the shards (`--shard K/N`) of one CI pipeline.

1. Each DIR is a run directory (it holds verdicts.json) or a folder of run directories (a shard's `--out`
   folder, a downloaded CI artifact): every sub-folder holding verdicts.json, by name. A DIR with none,
   or a run directory named twice, is a usage error.
2. The runs must have run one agent: the same step module and digest (a usage error otherwise); base
   seeds that differ are said in a note, since shards drawing different seeds do not partition one
   exploration's random schedules.
3. A run id two run directories share (every shard numbers its runs from 1) is renamed `ID.K` in the
   K-th run directory (counted from 1, in the order found), wherever it stands as a word in its events,
   its verdicts and its worker logs' names (`RunDir.renamed`), so that `killpoint judge` on the merged
   directory reaches the recorded verdicts again.
4. The histories are concatenated, each event's `i` (and the `of` of the evidence records pointing at
   it) moved past the events before it, so every run's evidence reads back as recorded.
5. A scenario's results are joined: its trials in run-directory order, its time the sum, its outcome the
   worst of the runs that ran it (error, stopped, fail, unknown, expected finding, pass), skipped only
   when every run skipped it (a shard that left it all to the others says nothing about it).
6. The merged run directory `<--out>/<stamp>-merge-<pid>/` gets history.jsonl, verdicts.json, meta.json
   (`command: merge`, the inputs, the fields they share), the worker logs and report.html; `--junit`
   writes the merged JUnit from the same verdicts. The scenario lines are printed as `run` prints them.
   Exit code: 2 if a scenario had an error, 1 if one failed or could not decide, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from killpoint.errors import UsageError

Event = dict[str, Any]
"""One history event as its JSON object (`killpoint.events.encode`)."""

if TYPE_CHECKING:  # the suite is imported when a merge runs, not when the parser is built
    from killpoint.faults.schedule import Schedule
    from killpoint.run.scenario import ScenarioResult

WORST_FIRST = ("error", "interrupted", "fail", "unknown", "expected", "pass", "skipped")
"""Scenario outcomes, the one that decides a merged scenario first (flow step 5)."""
SHARED_META = ("steps", "steps_digest", "worker_cmd", "grace", "run_timeout", "adapter", "exit_codes", "allow_egress",
               "skip_checkers", "previous_steps", "command", "mode", "seed", "killpoint")
"""meta.json fields the merged meta keeps when every input agrees on them (the replay lines read them)."""


@dataclass
class RunDir:
    """One input run directory, read (flow step 1)."""

    path: Path
    verdicts: list[dict]
    meta: dict
    events: list[Event]
    renames: dict[str, str] = field(default_factory=dict)
    """Run id -> its name in the merged directory (flow step 3); ids not in it keep their name."""

    def renamed(self, value: Any) -> Any:
        """Flow step 3: `value` (an event, a trial of verdicts.json, a file name) with every shared run id
        renamed wherever it stands as a word: a field, an incarnation `ID#N`, a key `ID:step`, a log name
        `ID-N.log`, a line of evidence. `crash-points-3` is not a word of `crash-points-30` nor of
        `crash-points-3.gw1`."""
        if not self.renames:
            return value
        ids = "|".join(re.escape(i) for i in sorted(self.renames, key=len, reverse=True))
        word = re.compile(rf"(?<![\w.-])({ids})(?![\w.])")
        return _deep(value, lambda text: word.sub(lambda m: self.renames[m[1]], text))

    def run_ids(self) -> set[str]:
        return {e["run_id"] for e in self.events if isinstance(e.get("run_id"), str)} | {
            t["run_id"] for sc in self.verdicts for t in sc["trials"]}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="one run directory, JUnit and HTML report from several (a pipeline's shards)")
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="a run directory, or a folder of them (e.g. each shard's --out folder)")
    p.add_argument("--out", default=".killpoint/runs", help="where the merged run directory goes")
    p.add_argument("--junit", default=None, help="also write the merged JUnit XML here")
    p.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    """Flow steps 1-6."""
    from killpoint.cli import validate  # noqa: PLC0415
    from killpoint.report.text import scenario_line  # noqa: PLC0415

    validate.check_paths(args.out, args.junit)
    runs = [read(p) for p in find_run_dirs([Path(d) for d in args.dirs])]
    for note in check_one_agent(runs):
        print(f"note: {note}")
    rename_shared_ids(runs)
    out = Path(args.out) / f"{time.strftime('%Y%m%d-%H%M%S')}-merge-{os.getpid()}"
    out.mkdir(parents=True)
    events = merged_events(runs)
    verdicts = merged_verdicts(runs)
    meta = merged_meta(runs)
    write_events(out / "history.jsonl", events)
    (out / "verdicts.json").write_text(json.dumps(verdicts, indent=2))
    (out / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    copy_logs(runs, out)
    results = scenario_results(verdicts, events)
    if args.junit:
        from killpoint.report.junit import junit_xml  # noqa: PLC0415

        Path(args.junit).write_text(junit_xml(results, meta.get("steps") or "", meta))
    from killpoint.report.html import draw  # noqa: PLC0415

    report, notes = draw(out)
    for note in notes:
        print(f"note: {note}")
    print(f"merged {len(runs)} run directories: " + ", ".join(str(r.path) for r in runs))
    for r in results:
        print(scenario_line(r))
    print(f"\nrun directory: {out}\nreport: {report}")
    if any(r.outcome == "error" for r in results):
        return 2
    return 1 if any(r.outcome in ("fail", "unknown", "interrupted") for r in results) else 0


def find_run_dirs(dirs: list[Path]) -> list[Path]:
    """Flow step 1: the run directories the DIRs name, in order."""
    found: list[Path] = []
    for d in dirs:
        if (d / "verdicts.json").is_file():
            inner = [d]
        elif d.is_dir():
            inner = sorted(p for p in d.iterdir() if (p / "verdicts.json").is_file())
        else:
            raise UsageError("not-a-run-dir", f"{d} is not a directory", "give run directories, or folders of them")
        if not inner:
            raise UsageError("not-a-run-dir", f"{d} holds no verdicts.json, nor do its sub-folders",
                             "give run directories written by killpoint run or explore, or the folders holding them")
        for p in inner:
            if p.resolve() in {q.resolve() for q in found}:
                raise UsageError("merge-twice", f"{p} is given twice", "name each run directory once")
            found.append(p)
    return found


def read(path: Path) -> RunDir:
    """Flow step 1: a run directory's verdicts, meta and events (a usage error if verdicts.json is unreadable)."""
    try:
        verdicts = json.loads((path / "verdicts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError("not-a-run-dir", f"{path / 'verdicts.json'} cannot be read ({exc})",
                         "give run directories written by killpoint run or explore") from None
    if not (isinstance(verdicts, list) and all(isinstance(sc, dict) and isinstance(sc.get("trials"), list)
                                               for sc in verdicts)):
        raise UsageError("not-a-run-dir", f"{path / 'verdicts.json'} is not in the shape killpoint writes",
                         "give run directories written by killpoint run or explore")
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    history = path / "history.jsonl"
    # as JSON objects: merging renames and renumbers them (flow steps 3 and 4) before they are written again
    from killpoint.events import encode  # noqa: PLC0415 - only when merging: the CLI's start stays light
    from killpoint.run.history import History  # noqa: PLC0415

    events = [encode(e) for e in History.read(history)[0]] if history.is_file() else []
    return RunDir(path, verdicts, meta if isinstance(meta, dict) else {}, events)


def check_one_agent(runs: list[RunDir]) -> list[str]:
    """Flow step 2: a usage error if the runs ran different agents; notes on what else differs."""
    for key in ("steps", "steps_digest"):
        values = {str(r.meta.get(key)) for r in runs if r.meta.get(key) is not None}
        if len(values) > 1:
            raise UsageError("merge-mismatch", f"the run directories ran different agents ({key}: "
                             f"{', '.join(sorted(values))})", "merge the shards of one run of one agent")
    seeds = sorted({r.meta["seed"] for r in runs if r.meta.get("seed") is not None})
    if len(seeds) > 1:
        return [f"the runs drew from different base seeds ({', '.join(map(str, seeds))}): their random schedules "
                "are not shares of one exploration (give every shard the same --seed)"]
    return []


def rename_shared_ids(runs: list[RunDir]) -> None:
    """Flow step 3: `ID.K` for a run id more than one run directory holds."""
    owners: dict[str, int] = {}
    for r in runs:
        for run_id in r.run_ids():
            owners[run_id] = owners.get(run_id, 0) + 1
    for k, r in enumerate(runs, 1):
        r.renames = {run_id: f"{run_id}.{k}" for run_id in r.run_ids() if owners[run_id] > 1}


def _deep(value: Any, text: Callable[[str], str]) -> Any:
    """`value` with `text` applied to every string in it, dict keys included."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {_deep(k, text): _deep(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep(v, text) for v in value]
    return value


def merged_events(runs: list[RunDir]) -> list[Event]:
    """Flow steps 3 and 4: every run's events, renamed and renumbered."""
    out: list[Event] = []
    for r in runs:
        offset = len(out)
        for e in r.events:
            moved = r.renamed(e)
            for key in ("i", "of"):
                if isinstance(e.get(key), int) and not isinstance(e.get(key), bool):
                    moved[key] = e[key] + offset
            out.append(moved)
    return out


def merged_verdicts(runs: list[RunDir]) -> list[dict]:
    """Flow step 5: one entry per scenario, in the order first found."""
    by_name: dict[str, list[dict]] = {}
    for r in runs:
        for sc in r.verdicts:
            trials = [r.renamed(t) for t in sc["trials"]]
            by_name.setdefault(sc["scenario"], []).append({**sc, "trials": trials})
    out = []
    for name, parts in by_name.items():
        ran = [p for p in parts if p["outcome"] != "skipped"] or parts
        outcome = min((p["outcome"] for p in ran), key=lambda o: WORST_FIRST.index(o) if o in WORST_FIRST else 0)
        reasons = list(dict.fromkeys(p.get("reason") or "" for p in ran if p["outcome"] == outcome))
        cuts = list(dict.fromkeys(p.get("cut") or "" for p in parts))
        out.append({"scenario": name, "outcome": outcome, "reason": "; ".join(r for r in reasons if r),
                    "cut": "; ".join(c for c in cuts if c),
                    "elapsed": round(sum(float(p.get("elapsed") or 0.0) for p in parts), 3),
                    "trials": [t for p in parts for t in p["trials"]]})
    return out


def merged_meta(runs: list[RunDir]) -> dict:
    """Flow step 6: the merged meta.json."""
    meta: dict = {"command": "merge", "inputs": [str(r.path) for r in runs],
                  "input_commands": [r.meta.get("command") for r in runs]}
    for key in SHARED_META:
        values = [r.meta.get(key) for r in runs]
        if key != "command" and all(v == values[0] for v in values) and values[0] is not None:
            meta[key] = values[0]
    if all(r.meta.get("command") in ("run", "explore") for r in runs) and "seed" in meta:
        meta["base_seed"] = meta["seed"]
    return meta


def copy_logs(runs: list[RunDir], out: Path) -> None:
    """Flow step 6: each run directory's worker logs (`<incarnation with # as ->.log`), renamed with its
    run ids."""
    for r in runs:
        for log in sorted(r.path.glob("*.log")):
            shutil.copyfile(log, out / r.renamed(log.name))


def write_events(path: Path, events: list[Event]) -> None:
    """Flow step 6: the merged history.jsonl, one event a line as `History` writes them."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(e, sort_keys=True, default=str) + "\n" for e in events)


def _schedule(text: str) -> Schedule:
    """A trial's schedule as verdicts.json spells it (none if it does not parse: a hand-edited file)."""
    from killpoint.faults.schedule import Schedule, ScheduleError  # noqa: PLC0415

    try:
        return Schedule.parse(text)
    except ScheduleError:
        return Schedule(())


def scenario_results(verdicts: list[dict], events: list[Event]) -> list[ScenarioResult]:
    """The merged verdicts as ScenarioResults (for the JUnit writer and the scenario lines): each trial's
    evidence read back from the merged history (empty when the history lacks it)."""
    from killpoint.checkers.evidence import Evidence  # noqa: PLC0415
    from killpoint.checkers.verdict import Verdict  # noqa: PLC0415
    from killpoint.run.evidence import from_history  # noqa: PLC0415
    from killpoint.run.scenario import ScenarioResult  # noqa: PLC0415
    from killpoint.run.trial import Trial  # noqa: PLC0415

    results = []
    for sc in verdicts:
        trials = []
        for t in sc["trials"]:
            try:
                evidence = from_history(events, t["run_id"])
            except LookupError:
                evidence = Evidence(t["run_id"])
            verdict_list = [Verdict(v["checker"], v["outcome"], v.get("reason", ""), tuple(v.get("evidence") or ()))
                            for v in t["verdicts"]]
            trials.append(Trial(t["run_id"], _schedule(t.get("schedule") or ""), t.get("seed"), evidence,
                                verdict_list))
        results.append(ScenarioResult(sc["scenario"], sc["outcome"], trials, sc["elapsed"], reason=sc["reason"],
                                      cut=sc["cut"]))
    return results
