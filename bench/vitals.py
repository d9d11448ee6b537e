"""How fast a run ends when a process it stands on is SIGKILLed from outside (issue 13): the local Postgres's
postmaster, or a fork server.

For each victim, `--repeat` times: start `killpoint run --scenario crash-points --postgres local` in a sandbox
(tests/helpers/sandbox.py), wait for the first faulted run's worker to start (its `inc.start` in the history),
SIGKILL the victim, and time the harness from the kill to its exit. Prints one line per victim: the exit codes
seen, the seconds (min / median / max), and the error code of the one line.

    python bench/vitals.py                 # both victims, 3 times each
    python bench/vitals.py --repeat 5 --victim forkserver

Run it from the repository root.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from tests.helpers.agents import wait_for  # noqa: E402
from tests.helpers.sandbox import Sandbox  # noqa: E402


def _victim(harness: psutil.Process, box: Sandbox, which: str) -> psutil.Process:
    kids = harness.children()
    if which == "postmaster":
        return next(p for p in kids if p.name() == "postgres" and str(box.pg_root) in " ".join(p.cmdline()))
    return min((p for p in kids if "killpoint.env.forkserver" in " ".join(p.cmdline())), key=lambda p: p.pid)


def once(which: str) -> tuple[int, float, str]:
    """(exit code, seconds from the kill to the exit, the error code of the line)."""
    with tempfile.TemporaryDirectory() as root, Sandbox(Path(root)) as box:
        proc = box.start("run", "--scenario", "crash-points", "--postgres", "local", "--quiet", "--out", str(box.out))
        try:
            wait_for(lambda: box.faulted_run_began() or proc.poll() is not None, timeout=180, what="a faulted run")
            victim = _victim(psutil.Process(proc.pid), box, which)
            t0 = time.monotonic()
            victim.kill()
            _, err = proc.communicate(timeout=300)
            seconds = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        m = re.search(r"error\[([a-z-]+)\]", err)
        return proc.returncode, seconds, m.group(1) if m else "(no error line)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--victim", choices=("postmaster", "forkserver"), action="append")
    args = parser.parse_args()
    for which in args.victim or ("postmaster", "forkserver"):
        runs = [once(which) for _ in range(args.repeat)]
        secs = sorted(s for _, s, _ in runs)
        print(f"{which:<11} exit {sorted({c for c, _, _ in runs})}  kill->exit s: min {secs[0]:.2f} "
              f"median {statistics.median(secs):.2f} max {secs[-1]:.2f}  line: {sorted({e for _, _, e in runs})}")


if __name__ == "__main__":
    main()
