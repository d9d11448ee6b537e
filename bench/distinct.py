"""How many schedules of a random exploration differ: drawn seed by seed as before, and with `distinct` now.

    python bench/distinct.py [--steps MODULE] [--n 1000] [--seed 1] [--run] [-j 2]

Runs `killpoint explore --scenario crash-points --random 1 --seed S` once to learn the agent's points from
its crash-free run (the `point` events of the baseline run in its history), then prints, for the first N
seeds of base seed S:

- before: the schedules of the first N seeds, repeats and all (each seed was a trial), and how many differ;
- of those, how many single faults a sweep runs too (`killpoint run` runs its exhaustive sweep first);
- now: the plan `explore --random N` runs (`Scenario.random_plan`: N that differ, or fewer) and the seeds it
  drew to find them.

With `--run`, it then runs that exploration (`-j`, default 2) and prints its schedules per second (each one
distinct now) against the distinct schedules per second the plan before gave at the same cost per trial
(projected: its rate times the share of its trials that were new). A benchmark, not a test: it asserts
nothing, and the rates depend on the machine and its load (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from killpoint.faults.schedule import (  # noqa: E402
    DRAWS_PER_SCHEDULE,
    DRAWS_SPARE,
    DRAWS_WITHOUT_NEW,
    Schedule,
    derive_seed,
    distinct,
    exhaustive,
    fault_budget,
)

SUMMARY = re.compile(r"crash-points\s+(\d+) schedules")


def killpoint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "killpoint.cli.main", *args], capture_output=True, text=True,
                          check=False)


def learned_points(steps: str | None, seed: int, out: Path) -> dict[str, list[str]]:
    """The points each step reached in the crash-free run of a one-schedule exploration."""
    proc = killpoint("explore", "--scenario", "crash-points", "--random", "1", "--seed", str(seed), "--no-store",
                     "--quiet", "--out", str(out), *(["--steps", steps] if steps else []))
    if proc.returncode not in (0, 1):
        sys.exit(f"explore failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    (history,) = out.glob("*/history.jsonl")
    points: dict[str, list[str]] = {}
    for line in history.read_text().splitlines():
        e = json.loads(line)
        if e.get("type") == "point" and str(e.get("run_id", "")).startswith("baseline") and e.get("step"):
            if e["point"] not in points.setdefault(e["step"], []):
                points[e["step"]].append(e["point"])
    return points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default=None)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--run", action="store_true")
    ap.add_argument("-j", default="2")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-distinct-") as tmp:
        points = learned_points(args.steps, args.seed, Path(tmp) / "learn")
        budget, actions = fault_budget(points), ("kill", "term")

        def draw(seed: int) -> Schedule:
            return Schedule.from_seed(seed, points, actions=actions, max_faults=budget)

        swept = set(exhaustive(points, actions))
        before = [draw(derive_seed(args.seed, i)) for i in range(args.n)]
        now = distinct(args.seed, args.n, draw)
        most = DRAWS_PER_SCHEDULE * args.n + DRAWS_SPARE + DRAWS_WITHOUT_NEW
        place = {derive_seed(args.seed, i): i for i in range(most)}
        drawn = place[now[-1][0]] + 1 if now else 0
        print(f"agent {args.steps or 'reference'}: {sum(map(len, points.values()))} points over {len(points)} steps, "
              f"{len(swept)} single faults, at most {budget} faults a schedule; base seed {args.seed}, N {args.n}")
        print(f"before: {len(set(before))} of {args.n} schedules differ ({args.n - len(set(before))} repeats), "
              f"{sum(1 for s in before if s in swept)} of them single faults a sweep runs too")
        print(f"now:    {len(now)} schedules, all different, from the first {drawn} seeds")
        if not args.run:
            return
        load = os.getloadavg()[0]
        started = time.monotonic()
        proc = killpoint("explore", "--scenario", "crash-points", "--random", str(args.n), "--seed", str(args.seed),
                         "-j", args.j, "--no-store", "--quiet", "--out", str(Path(tmp) / "run"),
                         *(["--steps", args.steps] if args.steps else []))
        wall = time.monotonic() - started
        m = SUMMARY.search(proc.stdout)
        ran = int(m[1]) if m else len(now)
        rate = ran / wall
        print(f"explore --random {args.n} -j {args.j}: exit {proc.returncode}, {ran} schedules in {wall:.1f} s "
              f"(whole command; load {load:.2f} at its start): {rate:.2f} distinct schedules/s now; "
              f"{rate * len(set(before)) / args.n:.2f}/s the plan before would have given (projected)")


if __name__ == "__main__":
    main()
