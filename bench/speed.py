"""The speed figures of issue 14, side by side, from one run:

    python bench/speed.py [--skip-run] [--postgres local] [--steps MODULE]

(`--steps`: the sweeps, the memory and `killpoint run` on another step module, e.g. one that never calls
the model, `tests.corpus.no_model`; the incarnation figures stay the reference agent's.)

1. The exhaustive crash-points sweep through the CLI with `-j 1` and `-j 2`: schedules per second (the
   scenario's own elapsed time, as the summary line prints it, so start-up is not counted) and the ratio.
   While the `-j 2` sweep runs, the resident memory of the harness and all its children is sampled
   (psutil, every 20 ms): its peak.
2. The median kill-to-resumed cycle, from the `-j 1` sweep's history.jsonl: from a `kill` fault event (the
   signal is sent as it is recorded) to the next incarnation's `step.start` of the same run.
3. Fork server vs exec per incarnation: `bench/incarnations.py --n 10` (spawn -> step.start medians).
4. Instrumentation overhead: crash-free runs with kill points on vs off, from the same
   `bench/incarnations.py` run: forked workers with and without `KILLPOINT_SOCKET`, ten of each in turn,
   the ratio of the medians (no interpreter start in either, which used to drown the difference).
5. CLI start: `killpoint scenarios`, `killpoint --help` and a usage error (median of 5 each).
6. `killpoint run` wall time (the whole suite; `--skip-run` leaves it out).

Then it prints one table with the targets of the issue. A benchmark, not a test: it asserts nothing and
its figures depend on the machine and its load (it prints the load average it started at).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

SUMMARY = re.compile(r"crash-points\s+(\d+) schedules\s+([\d.]+)s")


def killpoint(*args: str, cwd: str, timeout: float = 1800) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the CLI; its result and wall time."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "killpoint.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)
    return proc, time.perf_counter() - t


class PeakRss:
    """The peak of the summed RSS of a process and all its descendants, sampled on a thread (every 20 ms),
    and the peak of their summed PSS (every 100 ms: reading it costs more). RSS counts a page shared by
    several processes (a fork server's pages in every worker it forked) once in each; PSS splits it
    between them, so its sum is the memory really in use."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.peak_pss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        n = 0
        while not self._stop.wait(0.02):
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
            except psutil.Error:
                return
            total = pss = 0
            n += 1
            for p in procs:
                try:
                    if n % 5 == 0:
                        full = p.memory_full_info()
                        total, pss = total + full.rss, pss + full.pss
                    else:
                        total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.peak_pss = max(self.peak_pss, pss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def sweep(jobs: int, common: list[str], cwd: str, out: Path) -> tuple[int, float, Path, tuple[int, int]]:
    """(schedules, scenario seconds, run dir, (peak RSS, peak PSS) bytes) of one exhaustive sweep."""
    argv = [sys.executable, "-m", "killpoint.cli.main", "explore", "--scenario", "crash-points", "--exhaustive",
            "-j", str(jobs), "--out", str(out), *common]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    rss = PeakRss(proc.pid)
    stdout, stderr = proc.communicate(timeout=1800)
    peak = (rss.stop(), rss.peak_pss)
    m = SUMMARY.search(stdout)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"the -j {jobs} sweep failed (exit {proc.returncode}):\n{stdout}\n{stderr}")
    (run_dir,) = list(out.iterdir())
    return int(m.group(1)), float(m.group(2)), run_dir, peak


def kill_to_resumed(history: Path) -> list[float]:
    """Seconds from each `kill` fault to the next incarnation's first `step.start` of the same run."""
    events = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
    out = []
    for i, e in enumerate(events):
        if e["type"] != "fault" or e.get("action") != "kill":
            continue
        nxt = None
        for later in events[i + 1:]:
            if later.get("run_id") != e["run_id"]:
                continue
            if later["type"] == "inc.start" and later["inc"] != e.get("inc"):
                nxt = later["inc"]
            elif nxt and later["type"] == "point" and later.get("inc") == nxt and later["point"] == "step.start":
                out.append(later["t"] - e["t"])
                break
    return out


def incarnations(cwd: str, postgres: str) -> tuple[float | None, str | None]:
    """From `bench/incarnations.py --n 10`: how many times faster a fork-server incarnation reaches
    step.start than an exec'd one, and the kill points on / off figure ("1.03 (45.7 / 44.2 ms)")."""
    proc = subprocess.run([sys.executable, "bench/incarnations.py", "--n", "10", "--postgres", postgres],
                          capture_output=True, text=True, cwd=cwd, timeout=900)
    section = proc.stdout.split("spawn -> step.start", 1)[-1]
    m = re.search(r"fork \(standby\) .*\(\s*([\d.]+)x faster\)", section)
    o = re.search(r"kill points on / off .*: (.+)$", proc.stdout, re.MULTILINE)
    return (float(m.group(1)) if m else None), (o.group(1) if o else None)


def median_wall(argv: list[str], cwd: str, n: int = 5) -> float:
    return statistics.median(killpoint(*argv, cwd=cwd)[1] for _ in range(n))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--postgres", default="auto", help="Postgres provider (default auto)")
    p.add_argument("--skip-run", action="store_true", help="leave out the whole-suite `killpoint run`")
    p.add_argument("--steps", help="the step module of the sweeps and the run (default the reference agent)")
    args = p.parse_args(argv)
    cwd = str(Path(__file__).resolve().parent.parent)
    load = os.getloadavg()[0]
    common = ["--quiet", "--no-store", "--postgres", args.postgres, *(["--steps", args.steps] if args.steps else [])]
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="kp-speed-") as tmp:
        n1, s1, dir1, _ = sweep(1, common, cwd, Path(tmp) / "j1")
        n2, s2, _dir2, peak = sweep(2, common, cwd, Path(tmp) / "j2")
        rate1, rate2 = n1 / s1, n2 / s2
        rows += [("exhaustive crash-points, -j 1", f"{rate1:.1f} schedules/s ({n1} in {s1:.1f} s)", ""),
                 ("exhaustive crash-points, -j 2", f"{rate2:.1f} schedules/s ({n2} in {s2:.1f} s)", ">= 25/s"),
                 ("-j 2 / -j 1", f"{rate2 / rate1:.2f}x", ">= 1.7x")]
        cycles = kill_to_resumed(dir1 / "history.jsonl")
        rows.append(("kill -> resumed step.start, median", f"{statistics.median(cycles) * 1000:.1f} ms "
                     f"({len(cycles)} kills)" if cycles else "n/a", "< 10 ms"))
        ratio, on_off = incarnations(cwd, args.postgres)
        rows.append(("fork server vs exec per incarnation", f"{ratio:.1f}x faster" if ratio else "n/a", ">= 50x"))
        rows.append(("kill points on / off (crash-free, forked)", on_off or "n/a", "< 1.10"))
        rows += [("killpoint scenarios", f"{median_wall(['scenarios'], cwd) * 1000:.0f} ms", "< 500 ms"),
                 ("killpoint --help", f"{median_wall(['--help'], cwd) * 1000:.0f} ms", "< 1 s"),
                 ("usage error (unknown scenario)",
                  f"{median_wall(['run', '--scenario', 'no-such'], cwd) * 1000:.0f} ms", "< 1 s"),
                 ("peak RSS, harness + children (-j 2 sweep)", f"{peak[0] / 2**20:.0f} MB", "< 300 MB"),
                 ("peak PSS, harness + children (-j 2 sweep)", f"{peak[1] / 2**20:.0f} MB", "")]
        if not args.skip_run:
            proc, wall = killpoint("run", "--out", str(Path(tmp) / "run"), *common, cwd=cwd)
            rows.append(("killpoint run (whole suite)", f"{wall:.1f} s (exit {proc.returncode})", "< 20 s"))
    print(f"machine: {os.cpu_count()} cores, load average {load:.2f} at start, Python {sys.version.split()[0]}"
          + (f"; step module {args.steps}" if args.steps else ""))
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'measured':<34}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:<34}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
