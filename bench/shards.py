"""Shard balance of a CI matrix, measured: every shard of N run one after the other on this machine.

    python bench/shards.py [--counts 2,4,8] [--seed 1] [--jobs 1] [--skip-run] [--skip-explore]
                           [--postgres local] [--json OUT]

1. For each N of `--counts` and each K of 1..N, two CI jobs as a matrix would run them: the default suite
   (`killpoint run --seed S --shard K/N`) and an exhaustive crash-points sweep (`killpoint explore
   --scenario crash-points --exhaustive --seed S --shard K/N`), each with `-j 1` (so shards are comparable),
   `--no-store` (no machine's stored failures or checkpoints change the plan), `--allow-empty-shard`, under
   `nice -n 10`, one after the other.
2. Per shard: the wall time; the CPU (user + system) of the whole process tree, Postgres included (this
   process is made a child subreaper, so the server `pg_ctl` detaches and every other orphan is reparented
   here and reaped: `RUSAGE_CHILDREN` then counts all of them); the trials it ran and each scenario's
   seconds (from its run directory's verdicts.json).
3. Per N: the balance, the slowest shard's wall time / the mean shard's (the issue's target: <= 1.2), the
   same by CPU and by trials, and the scenario that made the slowest shard slow (the one whose seconds
   there are furthest above its mean over the shards).

A benchmark, not a test: it asserts nothing; its figures depend on the machine and its load (printed).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from killpoint.env.forkserver import _reap_all as reap  # every ended child, the orphans reparented here too

PR_SET_CHILD_SUBREAPER = 36


@dataclass
class ShardRun:
    """One shard's job: what it ran and what it cost."""

    job: str
    count: int
    index: int
    wall: float
    cpu: float
    trials: int
    exit: int
    scenarios: dict[str, float] = field(default_factory=dict)
    """Seconds per scenario (its `elapsed` in verdicts.json: its set-up and its trials)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Trials per scenario."""


def subreaper() -> None:
    """Orphans of the children (a detached postmaster) are reparented here, so their CPU can be counted."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"note: no child subreaper (errno {ctypes.get_errno()}): Postgres's CPU is not counted")


def children_cpu() -> float:
    """User + system seconds of every child reaped so far (and of all they reaped)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def job_argv(job: str, seed: int, shard: str, jobs: int, postgres: str, out: Path) -> list[str]:
    """Flow step 1: the CLI command of one shard of one job."""
    common = ["--seed", str(seed), "--shard", shard, "-j", str(jobs), "--no-store", "--allow-empty-shard",
              "--quiet", "--postgres", postgres, "--out", str(out)]
    head = ["nice", "-n", "10", sys.executable, "-m", "killpoint.cli.main"]
    if job == "run":
        return [*head, "run", *common]
    return [*head, "explore", "--scenario", "crash-points", "--exhaustive", *common]


def read_run(out: Path) -> tuple[int, dict[str, float], dict[str, int]]:
    """Flow step 2: trials, seconds per scenario and trials per scenario of the run directories under `out`."""
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for verdicts in sorted(out.glob("*/verdicts.json")):
        for record in json.loads(verdicts.read_text()):
            seconds[record["scenario"]] += float(record.get("elapsed") or 0.0)
            counts[record["scenario"]] += len(record.get("trials", ()))
    return sum(counts.values()), dict(seconds), dict(counts)


def run_shard(job: str, count: int, index: int, args: argparse.Namespace, tmp: Path) -> ShardRun:
    """Flow steps 1-2 for shard `index` of `count`."""
    out = tmp / f"{job}-{count}-{index}"
    argv = job_argv(job, args.seed, f"{index}/{count}", args.jobs, args.postgres, out)
    reap()
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=3600)
    wall = time.perf_counter() - t0
    reap()
    cpu = children_cpu() - cpu0
    if proc.returncode not in (0, 1):  # 1: a finding; anything else is a failed job, said and kept
        print(f"  {job} {index}/{count}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    trials, seconds, counts = read_run(out)
    return ShardRun(job, count, index, wall, cpu, trials, proc.returncode, seconds, counts)


def balance(values: list[float]) -> float:
    """The slowest / the mean (1.0: perfectly even)."""
    mean = statistics.fmean(values)
    return max(values) / mean if mean else float("nan")


def culprit(runs: list[ShardRun]) -> str:
    """Flow step 3: the scenario whose seconds in the slowest shard are furthest above its mean."""
    slowest = max(runs, key=lambda r: r.wall)
    names = {n for r in runs for n in r.scenarios}
    excess = {n: slowest.scenarios.get(n, 0.0) - statistics.fmean(r.scenarios.get(n, 0.0) for r in runs)
              for n in names}
    if not excess:
        return "-"
    name = max(excess, key=lambda n: excess[n])
    return f"{name} {excess[name]:+.1f} s"


def report(job: str, count: int, runs: list[ShardRun]) -> None:
    """Flow step 3: the shards' lines and the balance of one job at one N."""
    print(f"\n{job}, N={count}")
    print(f"  {'shard':>6} {'wall s':>8} {'CPU s':>8} {'trials':>7}  exit")
    for r in runs:
        print(f"  {r.index:>3}/{r.count:<2} {r.wall:>8.1f} {r.cpu:>8.1f} {r.trials:>7}  {r.exit}")
    walls, cpus, trials = [r.wall for r in runs], [r.cpu for r in runs], [float(r.trials) for r in runs]
    print(f"  total wall {sum(walls):.1f} s, CPU {sum(cpus):.1f} s, trials {int(sum(trials))}; balance (slowest/mean): "
          f"wall {balance(walls):.2f}, CPU {balance(cpus):.2f}, trials {balance(trials):.2f}; "
          f"slowest shard's excess: {culprit(runs)}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--counts", default="2,4,8", help="shard counts N, comma-separated")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, help="-j of every shard (default 1)")
    p.add_argument("--skip-run", action="store_true", help="leave out the default suite")
    p.add_argument("--skip-explore", action="store_true", help="leave out the exhaustive crash-points sweep")
    p.add_argument("--postgres", default="local")
    p.add_argument("--json", type=Path, help="also write every shard's figures here")
    args = p.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    jobs = [j for j, skip in (("explore", args.skip_explore), ("run", args.skip_run)) if not skip]
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); seed {args.seed}, "
          f"-j {args.jobs} per shard")
    subreaper()
    everything: list[ShardRun] = []
    with tempfile.TemporaryDirectory(prefix="kp-shards-") as tmp:
        for job in jobs:
            for count in counts:
                runs = [run_shard(job, count, k, args, Path(tmp)) for k in range(1, count + 1)]
                report(job, count, runs)
                everything.extend(runs)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in everything], indent=1))
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
