"""Black-box Python workers forked from preloaded fork servers vs exec'd: the LangGraph and DBOS examples.

    python bench/frameworks.py [--examples langgraph,dbos] [--modes fork,exec] [--suite] [--budget 2] [--jobs 1,2]

For each example and mode (fork: the default; exec: `--worker-preload none`):

1. kill -> resumed: `killpoint explore --scenario crash-points --exhaustive --actions kill` on the keyed
   example; from its history, per killed incarnation, the `kill` fault -> the successor's `inc.start` and
   -> its first kill point (the first thing it does that killpoint sees: a checkpoint write or a request to
   a fake), median and max in ms; and the sweep's wall time.
2. With `--suite`: the whole default suite, `killpoint run --seed 1 --budget B` (the example tests' command),
   its wall time, exit code and each scenario's line; with `--jobs 1,2`, once at each `-j` and the ratio of
   the first's wall time to each other's (default: `-j` left to killpoint, one per core).

A benchmark, not a test: it asserts nothing. Run it on an idle machine; it takes minutes (the exec suite
most of them).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = {"langgraph": "examples/langgraph/invoice_graph.py", "dbos": "examples/dbos/invoice_workflow.py"}
LINE = re.compile(r"^(PASS|FAIL|UNKNOWN|EXPECTED|SKIP|ERROR)\s+(\S+)\s+(\d+) schedules\s+(\S+)", re.MULTILINE)


def killpoint(out: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "killpoint.cli.main", *args, "--out", str(out)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode not in (0, 1):
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
    return time.monotonic() - start, proc


def base_args(example: str, mode: str) -> list[str]:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(REPO / EXAMPLES[example]))} {{run_id}} --keyed"
    return ["--adapter", example, "--worker-cmd", cmd, *(["--worker-preload", "none"] if mode == "exec" else [])]


def resumes(run_dir: Path) -> tuple[list[float], list[float]]:
    """Per kill: seconds from the `kill` fault to the successor's `inc.start`, and to its first point."""
    by_run: dict[str, list[dict]] = {}
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("run_id"):
            by_run.setdefault(e["run_id"], []).append(e)
    starts: list[float] = []
    firsts: list[float] = []
    for events in by_run.values():
        for i, e in enumerate(events):
            if e["type"] != "fault" or e.get("action") != "kill":
                continue
            successor = next((x for x in events[i:] if x["type"] == "inc.start"), None)
            if successor is None:
                continue
            starts.append(successor["t"] - e["t"])
            first = next((x for x in events[i:] if x["type"] == "point" and x.get("inc") == successor["inc"]), None)
            if first is not None:
                firsts.append(first["t"] - e["t"])
    return starts, firsts


def ms(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms (n={len(values)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", default="langgraph,dbos")
    parser.add_argument("--modes", default="fork,exec")
    parser.add_argument("--suite", action="store_true", help="also the whole default suite (minutes)")
    parser.add_argument("--budget", default="2")
    parser.add_argument("--jobs", default="", help="the suite at each of these -j (comma-separated), in turn")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kp-bench-frameworks-") as tmp:
        for example in args.examples.split(","):
            for mode in args.modes.split(","):
                out = Path(tmp) / f"{example}-{mode}"
                wall, proc = killpoint(out, "explore", "--scenario", "crash-points", "--exhaustive", "--actions",
                                       "kill", *base_args(example, mode))
                (run_dir,) = sorted(p for p in out.iterdir() if p.is_dir())
                starts, firsts = resumes(run_dir)
                print(f"{example:9} {mode:4} crash-points --exhaustive --actions kill: {wall:.1f} s, exit "
                      f"{proc.returncode}; kill -> successor's start {ms(starts)}; kill -> its first point "
                      f"{ms(firsts)}", flush=True)
                if not args.suite:
                    continue
                first = None
                for jobs in args.jobs.split(",") if args.jobs else [""]:
                    j = ["-j", jobs] if jobs else []
                    wall, proc = killpoint(out, "run", "--seed", "1", "--budget", args.budget, *j,
                                           *base_args(example, mode))
                    first = first or wall
                    lines = ", ".join(f"{name} {outcome} {n} in {t}" for outcome, name, n, t in LINE.findall(proc.stdout))
                    print(f"{example:9} {mode:4} killpoint run --seed 1 --budget {args.budget} {' '.join(j)}: "
                          f"{wall:.0f} s ({first / wall:.2f}x the first), exit {proc.returncode}: {lines}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
