"""False verdicts under faults that last: the reference agent (or `--steps`) against random schedules that
hold clock jumps and outages (issue 23), with the figure the docs quote: schedules with a new fault, and how
many of them did not pass.

It runs `killpoint explore --scenario SCENARIO --random N --seed SEED` (mixed-faults by default: a service
fault and a process fault per schedule, outages of both lengths and clock jumps among them) in a subprocess,
then reads the run directory's `history.jsonl`: each judged trial's schedule (its `run.begin`) and outcome
(its `verdict`). A trial whose schedule holds a `clock±N` or `outage[=N]` fault counts as one with a new
fault; on a correct agent every trial must pass (a failure or an unknown is a false verdict).

    python bench/lasting_faults.py                        # 1300 mixed-faults schedules, base seed 23
    python bench/lasting_faults.py --random 200 --seed 5 --scenario flaky-services
    python bench/lasting_faults.py --steps tests.gallery.variants.period_checkpointed
    python bench/lasting_faults.py --rejudge RUN_DIR/history.jsonl   # a kept history, judged by today's checkers

Run it from the repository root. Exit 0 when no trial with a new fault failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from killpoint.faults.points import base  # noqa: E402
from killpoint.faults.schedule import Schedule  # noqa: E402

NEW = frozenset({"clock", "outage"})


def judged(history: Path) -> list[tuple[str, str, list[str]]]:
    """(schedule, outcome, failing checkers) of every judged trial in a history (the baseline aside)."""
    schedules: dict[str, str] = {}
    out = []
    for line in history.read_text().splitlines():
        e = json.loads(line)
        if e.get("type") == "run.begin":
            schedules[e.get("run_id")] = e.get("schedule", "")
        elif e.get("type") == "verdict" and e.get("run_id") in schedules and schedules[e["run_id"]]:
            out.append((schedules[e["run_id"]], e.get("outcome"), list(e.get("failing") or [])))
    return out


def rejudged(history: Path) -> list[tuple[str, str, list[str]]]:
    """(schedule, outcome, failing checkers) of every trial of a stored history, judged again now."""
    from killpoint.run.history import History
    from killpoint.run.rejudge import rejudge

    return [(r.schedule, r.outcome, [v.checker for v in r.verdicts if v.outcome != "pass"])
            for r in rejudge(History.load(history)) if r.schedule]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="mixed-faults")
    p.add_argument("--random", type=int, default=1300, help="random schedules to run (default 1300)")
    p.add_argument("--seed", type=int, default=23)
    p.add_argument("--steps", default=None, help="step module (default: the reference agent)")
    p.add_argument("-j", default=None, help="schedules at a time (default: the cores)")
    p.add_argument("--rejudge", type=Path, default=None, metavar="HISTORY",
                   help="judge the trials of this history.jsonl again instead of running any")
    args = p.parse_args(argv)
    if args.rejudge is not None:
        started = time.monotonic()
        return report(args, rejudged(args.rejudge), time.monotonic() - started, "rejudged")
    with tempfile.TemporaryDirectory(prefix="kp-lasting-") as tmp:
        cmd = [sys.executable, "-m", "killpoint.cli.main", "explore", "--scenario", args.scenario,
               "--random", str(args.random), "--seed", str(args.seed), "--out", tmp, "--quiet", "--no-store",
               *(["--steps", args.steps] if args.steps else []), *(["-j", args.j] if args.j else [])]
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
        took = time.monotonic() - started
        histories = sorted(Path(tmp).glob("*/history.jsonl"))
        if not histories:
            print(done.stdout + done.stderr)
            return 2
        trials = judged(histories[-1])
    return report(args, trials, took, f"exit {done.returncode}")


def report(args: argparse.Namespace, trials: list[tuple[str, str, list[str]]], took: float, how: str) -> int:
    """Print the figures of `trials`; 1 if one did not pass."""
    with_new = [(s, o, f) for s, o, f in trials if NEW & {base(f.action) for f in Schedule.parse(s)}]
    kinds = Counter(base(f.action) for s, _, _ in with_new for f in Schedule.parse(s) if base(f.action) in NEW)
    actions = Counter(f.action for s, _, _ in with_new for f in Schedule.parse(s) if base(f.action) in NEW)
    bad = [(s, o, f) for s, o, f in trials if o != "pass"]
    print(f"{args.scenario}, base seed {args.seed}, steps {args.steps or 'the reference agent'}: "
          f"{len(trials)} random schedules judged in {took:.0f}s ({how})")
    print(f"  with a clock jump or an outage: {len(with_new)} "
          f"({', '.join(f'{a} {n}' for a, n in sorted(actions.items()))}; faults by kind: "
          f"{', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})")
    print(f"  not passed: {len(bad)}" + "".join(f"\n    {o} {s} ({', '.join(f)})" for s, o, f in bad[:20]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
