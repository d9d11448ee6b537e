"""False verdicts: how many trials of each corpus agent (tests/corpus/, correct agents written unusual ways)
any checker fails. The answer must be 0 everywhere; UNKNOWN verdicts are counted apart (not bugs, not passes).

For every corpus agent, in a fresh process with its own harness session (`killpoint explore`'s):

- crash-points: every single fault (`exhaustive()`), then `--random N` random multi-fault schedules from base
  seed `--seed`;
- the other scenarios a plain `killpoint run --steps` runs on a step module (zombie-worker, deploy-drain,
  flaky-services, mixed-faults): `--others M` random schedules each.

    python bench/corpus.py                          # every agent, 200 random crash-points schedules each
    python bench/corpus.py --agent installments --random 20 --others 2

Run it from the repository root (the agents are imported as `tests.corpus.*`). Prints a markdown table: per
agent, trials run, trials with a FAIL (and the first failing checker and schedule), trials UNKNOWN, seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from tests.corpus import AGENTS  # noqa: E402

OTHERS = ("zombie-worker", "deploy-drain", "flaky-services", "mixed-faults")


@dataclass
class Tally:
    """One agent's figures."""

    trials: int = 0
    failed: int = 0
    unknown: int = 0
    seconds: float = 0.0
    first: str = ""
    unknowns: list[str] = field(default_factory=list)
    error: str = ""


def measure(module: str, count: int, others: int, seed: int, jobs: int, out: str) -> Tally:
    """In this process: one session on the agent, its trials judged, the verdicts counted."""
    from killpoint.cli import commands, parsers
    from killpoint.run.scenario import Context, find

    parser = argparse.ArgumentParser()
    parsers.add_parsers(parser.add_subparsers())
    args = parser.parse_args(["explore", "--scenario", "crash-points", "--random", str(count), "--seed", str(seed),
                              "--steps", module, "--quiet", "--out", out, "-j", str(jobs)])
    tally = Tally()
    started = time.monotonic()
    with commands.session(commands.invocation(args, "explore", f"corpus-{module}")) as s:
        trials = []
        for name in ("crash-points", *OTHERS):
            ctx = Context(session=s, seed=seed, budget=1e9)
            scenario = find(name)
            if name == "crash-points":
                trials += scenario.exhaustive(ctx) + scenario.random(ctx, count)
            elif others:
                trials += scenario.random(ctx, others)
    tally.seconds = time.monotonic() - started
    tally.trials = len(trials)
    for t in trials:
        bad = [v for v in t.verdicts if v.outcome == "fail"]
        if bad:
            tally.failed += 1
            tally.first = tally.first or f"{bad[0].checker}: {bad[0].reason} ({t.schedule or 'crash-free'})"
        elif t.outcome == "unknown":
            tally.unknown += 1
            why = next((f"{v.checker}: {v.reason}" for v in t.verdicts if v.outcome == "unknown"), "")
            if why not in tally.unknowns:
                tally.unknowns.append(why)
    return tally


def child(module: str, count: int, others: int, seed: int, jobs: int) -> Tally:
    """Measure in a fresh process (its own fork server and fakes) and read its JSON answer."""
    with tempfile.TemporaryDirectory(prefix="killpoint-corpus-") as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                                             if p)}
        proc = subprocess.run([sys.executable, __file__, "--child", module, "--random", str(count), "--others",
                               str(others), "--seed", str(seed), "-j", str(jobs), "--out", tmp],
                              capture_output=True, text=True, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                              timeout=7200)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return Tally(error=(proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
    return Tally(**json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> int:
    names = {a.name: a for a in AGENTS}
    p = argparse.ArgumentParser(prog="python bench/corpus.py", description=__doc__.split("\n")[0])
    p.add_argument("--agent", action="append", choices=sorted(names), help="only these (repeatable)")
    p.add_argument("--random", type=int, default=200, metavar="N", help="random crash-points schedules (default 200)")
    p.add_argument("--others", type=int, default=5, metavar="M",
                   help="random schedules of each other scenario (default 5)")
    p.add_argument("--seed", type=int, default=1, help="base seed (default 1)")
    p.add_argument("-j", type=int, default=2, help="schedules at a time (default 2)")
    p.add_argument("--child", metavar="MODULE", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        tally = measure(args.child, args.random, args.others, args.seed, args.j, args.out)
        print(json.dumps(tally.__dict__), flush=True)
        return 0
    chosen = [names[n] for n in args.agent] if args.agent else list(AGENTS)
    print(f"False verdicts on {len(chosen)} correct agents: crash-points exhaustive + {args.random} random "
          f"schedules, {args.others} random of each of {', '.join(OTHERS)} (base seed {args.seed}).\n")
    print("| agent | shape | trials | FAIL | UNKNOWN | seconds | first FAIL |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    bad = 0
    for a in chosen:
        t = child(a.module, args.random, args.others, args.seed, args.j)
        bad += t.failed + bool(t.error)
        first = f"error: {t.error[:80]}" if t.error else t.first or "-"
        print(f"| {a.name} | {a.shape} | {t.trials} | {t.failed} | {t.unknown} | {t.seconds:.0f} | {first} |",
              flush=True)
        for why in t.unknowns[:3]:
            print(f"|  | unknown: {why[:140]} | | | | | |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
