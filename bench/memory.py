"""Memory over a long exploration: does the harness stay flat as schedules pile up?

    python bench/memory.py [--n 2000] [-j 2] [--postgres local]

Runs `killpoint explore --scenario crash-points --random N -j J` and, while it runs, samples (psutil) the
resident memory of the harness process alone (every 0.25 s) and the summed PSS of the harness and every
descendant (fork servers and their workers, the fakes, a local Postgres it started: every 2 s), keyed by
how many trials the harness had reported done (its `random [k/N]` progress lines on stderr). It prints the
harness's RSS and the tree's PSS at 10 %, 50 % and 100 % of the trials, and the growth from 10 % to 100 %
(the issue's target: < 10 % from schedule 1,000 to 10,000; a shorter run shows the trend). A benchmark,
not a test: it asserts nothing; its figures depend on the machine.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time

import psutil

PROGRESS = re.compile(r"random \[(\d+)/(\d+)\]")


class Sampler:
    """Samples (trials done, harness RSS, tree PSS) on a thread until stopped."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.done = 0
        self.samples: list[tuple[int, int, int | None]] = []
        self.peak_tree_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(0.25):
            n += 1
            try:
                rss = self.proc.memory_info().rss
                tree = [self.proc, *self.proc.children(recursive=True)]
            except psutil.Error:
                return
            pss: int | None = None
            total_rss = 0
            if n % 8 == 0:
                pss = 0
                for p in tree:
                    try:
                        full = p.memory_full_info()
                        pss += full.pss
                        total_rss += full.rss
                    except psutil.Error:
                        pass
                self.peak_tree_rss = max(self.peak_tree_rss, total_rss)
            self.samples.append((self.done, rss, pss))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, done: int) -> tuple[int, int | None]:
        """(harness RSS, tree PSS) of the first samples taken once `done` trials were reported."""
        after = [s for s in self.samples if s[0] >= done]
        rss = after[0][1] if after else self.samples[-1][1]
        pss = next((s[2] for s in after if s[2] is not None), None)
        return rss, pss


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=2000, help="random schedules to explore")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument("--postgres", default="auto")
    args = p.parse_args(argv)
    mb = 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="kp-bench-mem-") as tmp:
        cmd = [sys.executable, "-m", "killpoint.cli.main", "explore", "--scenario", "crash-points", "--random",
               str(args.n), "-j", str(args.jobs), "--seed", "1", "--postgres", args.postgres, "--out", tmp]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
        sampler = Sampler(proc.pid)
        assert proc.stderr is not None
        for line in proc.stderr:
            m = PROGRESS.search(line)
            if m:
                sampler.done = max(sampler.done, int(m.group(1)))
        out = proc.stdout.read() if proc.stdout else ""
        proc.wait()
        wall = time.perf_counter() - t0
        sampler.stop()
    if proc.returncode not in (0, 1) or not sampler.samples:
        print(f"the exploration failed (exit {proc.returncode}):\n{out[-2000:]}", file=sys.stderr)
        return 1
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in psutil.getloadavg())}")
    print(f"{args.n} random crash-points schedules at -j {args.jobs}: {wall:.1f} s wall, "
          f"{args.n / wall:.1f} schedules/s (start-up included)")
    print(f"{'trials done':>12}  {'harness RSS':>12}  {'tree PSS':>10}")
    marks = sorted({max(1, args.n // 10), args.n // 4, args.n // 2, 3 * args.n // 4, args.n})
    for mark in marks:
        rss, pss = sampler.at(mark)
        print(f"{mark:>12}  {rss / mb:>9.1f} MB  {'-' if pss is None else f'{pss / mb:.1f} MB':>10}")
    first, last = sampler.at(marks[0])[0], sampler.at(marks[-1])[0]
    print(f"harness RSS growth from trial {marks[0]} to {marks[-1]}: {100 * (last - first) / first:+.1f} %")
    half = sampler.at(marks[2])[0]
    print(f"harness RSS growth from trial {marks[2]} to {marks[-1]}: {100 * (last - half) / half:+.1f} %")
    print(f"peak RSS of the whole tree (summed, shared pages counted in each): {sampler.peak_tree_rss / mb:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
