"""Where the time of a trial goes, from a run directory's own history (every event carries a monotonic `t`):

    python bench/spans.py RUN_DIR [RUN_DIR...]

For each span below, the median and the 90th percentile in milliseconds over the run's trials (each span is
measured where it occurs; a span a trial does not have is not counted for it). Several run directories
(e.g. before and after a change) print side by side. A benchmark, not a test: it asserts nothing.

Spans of one incarnation: `inc.start` -> `worker.start` (fork and the child's own set-up), `worker.start`
-> first `step.start` (connect, schema check, clients, lease), `model.request` -> next `checkpoint.writing`
(the model call through the SDK and the step's own work), and `kill` fault -> `inc.end` (signal, reap,
report). Spans of a trial: `inc.end` -> next `inc.start` (lease expiry, status, spawn), `kill` -> resumed
`step.start`, last `inc.end` -> `run.end`, `run.end` -> `run.evidence`, `run.evidence` -> `verdict`, and
`run.begin` -> `verdict` (the whole trial). And the CPU time (user + system) of each forked incarnation's
leader, from its `inc.end` (`cpu`): killed ones and those that ended on their own apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

SPANS = ("spawn: run.begin -> inc.start", "inc.start -> worker.start", "worker.start -> step.start",
         "model.request -> checkpoint.writing", "kill -> inc.end", "inc.end -> next inc.start",
         "kill -> resumed step.start", "inc.end -> run.end", "run.end -> run.evidence",
         "run.evidence -> verdict", "trial: run.begin -> verdict", "CPU of a killed incarnation",
         "CPU of an incarnation that ran to its end")


def spans(history: Path) -> dict[str, list[float]]:
    """Every span's durations (seconds) in one history, trials of crash-free baselines included."""
    by_run: dict[str, list[dict]] = defaultdict(list)
    for line in history.read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            if e.get("run_id"):
                by_run[e["run_id"]].append(e)
    out: dict[str, list[float]] = defaultdict(list)
    for events in by_run.values():
        _trial(events, out)
    return out


def _first(events: list[dict], start: int, pred) -> dict | None:
    return next((e for e in events[start:] if pred(e)), None)


def _trial(events: list[dict], out: dict[str, list[float]]) -> None:
    def add(name: str, a: dict | None, b: dict | None) -> None:
        if a is not None and b is not None:
            out[name].append(b["t"] - a["t"])

    def kind(t: str, **kw):
        return lambda e: e["type"] == t and all(e.get(k) == v for k, v in kw.items())

    begin = _first(events, 0, kind("run.begin"))
    add(SPANS[0], begin, _first(events, 0, kind("inc.start")))
    for i, e in enumerate(events):
        if e["type"] == "inc.start":
            inc = e["inc"]
            started = _first(events, i, kind("note", inc=inc, note="worker.start"))
            add(SPANS[1], e, started)
            add(SPANS[2], started, _first(events, i, kind("point", inc=inc, point="step.start")))
        elif e["type"] == "point" and e.get("point") == "model.request":
            add(SPANS[3], e, _first(events, i, kind("point", inc=e.get("inc"), point="checkpoint.writing")))
        elif e["type"] == "fault" and e.get("action") == "kill":
            add(SPANS[4], e, _first(events, i, kind("inc.end", inc=e.get("inc"))))
            killed = e.get("inc")
            nxt = _first(events, i, lambda x, killed=killed: x["type"] == "inc.start" and x["inc"] != killed)
            if nxt is not None:
                add(SPANS[6], e, _first(events, i, kind("point", inc=nxt["inc"], point="step.start")))
        elif e["type"] == "inc.end":
            add(SPANS[5], e, _first(events, i, kind("inc.start")))
            if e.get("cpu") is not None:
                out[SPANS[11] if e.get("signal") else SPANS[12]].append(e["cpu"])
    ends = [e for e in events if e["type"] == "inc.end"]
    end = _first(events, 0, kind("run.end"))
    if ends:
        add(SPANS[7], ends[-1], end)
    evidence = _first(events, 0, kind("run.evidence"))
    add(SPANS[8], end, evidence)
    verdict = _first(events, 0, kind("verdict"))
    add(SPANS[9], evidence, verdict)
    add(SPANS[10], begin, verdict)


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"{statistics.median(ms):6.1f} / {p90:6.1f} ({len(ms)})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python bench/spans.py", description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory (holds history.jsonl)")
    argv = parser.parse_args(argv).run_dirs
    missing = [d for d in argv if not (Path(d) / "history.jsonl").is_file()]
    if missing:
        print(f"spans: no history.jsonl in {', '.join(missing)}. Fix: give run directories "
              "(killpoint prints its own as 'run directory: ...')", file=sys.stderr)
        return 2
    tables = [spans(Path(d) / "history.jsonl") for d in argv]
    width = max(map(len, SPANS))
    print(f"{'span (ms: median / p90 (n))':<{width}}  " + "  ".join(f"{Path(d).name[-26:]:<24}" for d in argv))
    for name in SPANS:
        print(f"{name:<{width}}  " + "  ".join(f"{_fmt(t.get(name, [])):<24}" for t in tables))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
