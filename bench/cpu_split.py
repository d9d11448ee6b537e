"""CPU per schedule by process kind, and what -j buys: the figures of the scaling table (docs/performance.md).

    python bench/cpu_split.py [--random 100] [--jobs 1,2] [--seed 1] [--postgres local]

1. For each -j of `--jobs`, one exploration (`killpoint explore --scenario crash-points --random N --seed S
   -j J --no-store`) under `nice -n 10`, this process a child subreaper (so the postmaster `pg_ctl`
   detaches is reparented here and is found in the tree).
2. Every 0.2 s the process tree is read (psutil) and each process's CPU (user + system) is put to a kind:
   the harness (the CLI process: its scheduling and trial threads and the fake services, which are threads
   in it; its main thread apart), the fork servers, the worker incarnations (the servers' children, alive
   or reaped: a server's `children_*` times), Postgres (the postmaster, its backends alive or reaped), and
   other (initdb, pg_ctl: this process's `RUSAGE_CHILDREN` less the kinds). A kind's figure is the highest
   its sum reached over the samples (a counter only grows, but a process that ended is in its parent's
   `children_*` only once reaped).
3. Per -j: schedules, the scenario's seconds (its summary line), schedules/s, CPU per schedule by kind; then
   the projection: schedules/s at -j 1, 2, 4, 8, 16, 64 on as many cores, the least of three bounds:
   latency (-j x the measured -j 1 rate), CPU (cores / CPU per schedule of the whole tree) and the GIL
   (1 / the harness's CPU per schedule: its Python threads run one at a time, so that is the serial part).
   Projected, not measured: it assumes the per-schedule CPU stays what -j 1 measured.

A benchmark, not a test: it asserts nothing; the figures depend on the machine and its load (printed).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shards import children_cpu, reap, subreaper  # noqa: E402

SUMMARY = re.compile(r"crash-points\s+(\d+) schedules\s+([\d.]+)s")
KINDS = ("harness", "harness main thread", "fork servers", "workers", "postgres", "other")


def _cpu(times: psutil._common.pcputimes, children: bool = False) -> float:  # type: ignore[name-defined]
    own = times.user + times.system
    return own + (times.children_user + times.children_system if children else 0.0)


def _kind(p: psutil.Process, harness: int) -> str:
    """Flow step 2: which kind of process `p` is."""
    name, cmd = p.name(), " ".join(p.cmdline())
    if p.pid == harness:
        return "harness"
    if name.startswith("postgres") or "postgres" in cmd.split(" ")[0]:
        return "postgres"
    if "killpoint.env.forkserver" in cmd or "killpoint.env.pymain" in cmd:
        parent = p.parent()
        parent_cmd = " ".join(parent.cmdline()) if parent else ""
        return "workers" if "killpoint.env.forkserver" in parent_cmd else "fork servers"
    return "other"


class Sampler:
    """Flow step 2 on a thread: the highest sum per kind over the samples."""

    def __init__(self, harness: int) -> None:
        self.harness = harness
        self.peak: dict[str, float] = defaultdict(float)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.2):
            sums: dict[str, float] = defaultdict(float)
            for p in me.children(recursive=True):
                try:
                    kind = _kind(p, self.harness)
                    times = p.cpu_times()
                    if kind == "harness":
                        sums[kind] += _cpu(times)
                        sums["harness main thread"] += next((t.user_time + t.system_time for t in p.threads()
                                                             if t.id == p.pid), 0.0)
                    elif kind == "fork servers":
                        sums[kind] += _cpu(times)
                        sums["workers"] += times.children_user + times.children_system
                    elif kind == "postgres" and p.parent() is not None and p.parent().name() != "postgres":
                        sums[kind] += _cpu(times, children=True)  # the postmaster: its reaped backends too
                    else:
                        sums[kind] += _cpu(times)
                except psutil.Error:
                    continue
            for kind, value in sums.items():
                self.peak[kind] = max(self.peak[kind], value)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return dict(self.peak)


def explore(jobs: int, args: argparse.Namespace, tmp: Path) -> tuple[int, float, dict[str, float], float]:
    """Flow steps 1-2: (schedules, scenario seconds, CPU seconds by kind, whole tree's CPU seconds)."""
    out = tmp / f"j{jobs}"
    argv = ["nice", "-n", "10", sys.executable, "-m", "killpoint.cli.main", "explore", "--scenario", "crash-points",
            "--random", str(args.random), "--seed", str(args.seed), "-j", str(jobs), "--no-store", "--quiet",
            "--postgres", args.postgres, "--out", str(out), *(["--steps", args.steps] if args.steps else [])]
    env = dict(os.environ)
    if args.steps:  # a step module of this checkout (tests.corpus.no_model): importable from the temp folder
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    reap()
    before = children_cpu()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp, env=env)
    sampler = Sampler(proc.pid)  # `nice` execs the CLI: the same pid
    stdout, stderr = proc.communicate(timeout=3600)
    peak = sampler.stop()
    reap()
    total = children_cpu() - before
    m = SUMMARY.search(stdout)
    if m is None:
        raise SystemExit(f"the -j {jobs} exploration failed (exit {proc.returncode}):\n{stdout}\n{stderr}")
    known = sum(v for k, v in peak.items() if k != "harness main thread")
    peak["other"] = peak.get("other", 0.0) + max(0.0, total - known)
    return int(m[1]), float(m[2]), peak, total


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--random", type=int, default=100, help="random schedules per exploration")
    p.add_argument("--jobs", default="1,2", help="the -j values to measure, comma-separated")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--postgres", default="local")
    p.add_argument("--steps", help="the step module explored (default the reference agent), e.g. tests.corpus.no_model")
    args = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)"
          + (f"; step module {args.steps}" if args.steps else ""))
    subreaper()
    measured: dict[int, tuple[int, float, dict[str, float], float]] = {}
    with tempfile.TemporaryDirectory(prefix="kp-cpu-") as tmp:
        for jobs in [int(j) for j in args.jobs.split(",")]:
            measured[jobs] = explore(jobs, args, Path(tmp))
    print(f"\n{'':>22}" + "".join(f"{'-j ' + str(j):>12}" for j in measured))
    print(f"{'schedules':>22}" + "".join(f"{m[0]:>12}" for m in measured.values()))
    print(f"{'scenario seconds':>22}" + "".join(f"{m[1]:>12.1f}" for m in measured.values()))
    print(f"{'schedules/s':>22}" + "".join(f"{m[0] / m[1]:>12.2f}" for m in measured.values()))
    for kind in KINDS:
        print(f"{kind + ' ms/sched':>22}" + "".join(f"{1000 * m[2].get(kind, 0.0) / m[0]:>12.1f}"
                                                     for m in measured.values()))
    print(f"{'tree ms/sched':>22}" + "".join(f"{1000 * m[3] / m[0]:>12.1f}" for m in measured.values()))
    first = measured[min(measured)]
    rate1, cpu, serial = first[0] / first[1], first[3] / first[0], first[2].get("harness", 0.0) / first[0]
    print(f"\nprojected from -j {min(measured)} (cores = -j; the least of latency, CPU and GIL bounds):")
    for j in (1, 2, 4, 8, 16, 64):
        bounds = {"latency": j * rate1, "CPU": j / cpu, "GIL": 1 / serial if serial else float("inf")}
        bound = min(bounds, key=lambda k: bounds[k])
        print(f"  -j {j:>2}: {bounds[bound]:7.1f} schedules/s ({bound}-bound)")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
