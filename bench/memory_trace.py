"""What grows in the harness's memory over a long exploration, by Python object and by allocator.

    python bench/memory_trace.py [--n 600] [--first 200] [--last 600] [--no-tracemalloc]

Runs `killpoint explore --scenario crash-points --random N -j 2 --seed 1` in this process, counting judged
trials (`Session.forget` wrapped). Every 100 trials it prints a row: the process's RSS, the Python objects
tracemalloc traces, glibc's heap (`mallinfo2`: bytes the heap holds, in use, free inside it) and the blocks
Python allocated (`sys.getallocatedblocks`). With tracemalloc it snapshots at trials `--first` and `--last`
and prints the biggest growths between them by traceback (the bytes a trial adds, by where they were
allocated). Tracemalloc slows the run about 2x and its own traces grow RSS: compare RSS rows with
`--no-tracemalloc`, or with `bench/memory.py`. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys
import tempfile
import threading
import tracemalloc

import psutil


class MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (glibc >= 2.33)."""

    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=600)
    p.add_argument("--first", type=int, default=200)
    p.add_argument("--last", type=int, default=600)
    p.add_argument("--no-tracemalloc", action="store_true")
    args = p.parse_args(argv)
    trace = not args.no_tracemalloc
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    proc, lock, count, snaps = psutil.Process(), threading.Lock(), [0], {}
    out = sys.stdout
    mb = 1024 * 1024
    print(f"{'trials':>6} {'RSS':>8} {'traced':>8} {'heap':>8} {'in use':>8} {'free':>8} {'blocks':>9}", file=out)

    def row(n: int) -> None:
        m = libc.mallinfo2()
        traced = tracemalloc.get_traced_memory()[0] if trace else 0
        print(f"{n:>6} {proc.memory_info().rss / mb:>7.1f}M {traced / mb:>7.1f}M {(m.arena + m.hblkhd) / mb:>7.1f}M "
              f"{(m.uordblks + m.hblkhd) / mb:>7.1f}M {m.fordblks / mb:>7.1f}M {sys.getallocatedblocks():>9}",
              file=out, flush=True)

    from killpoint.run import trial as trial_mod

    forget = trial_mod.Session.forget

    def counted(self: trial_mod.Session, t: trial_mod.Trial, spool: bool = False) -> None:
        forget(self, t, spool)
        with lock:
            count[0] += 1
            n = count[0]
            if n % 100 == 0:
                row(n)
            if trace and n in (args.first, args.last):
                gc.collect()
                snaps[n] = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "*linecache.py"),
                     tracemalloc.Filter(False, "<frozen importlib._bootstrap>")])

    trial_mod.Session.forget = counted  # type: ignore[method-assign]
    if trace:
        tracemalloc.start(8)
    from killpoint.cli.main import main as killpoint

    with tempfile.TemporaryDirectory(prefix="kp-bench-trace-") as tmp:
        os.chdir(tmp)
        try:
            killpoint(["explore", "--scenario", "crash-points", "--random", str(args.n), "-j", "2", "--seed", "1",
                       "--out", tmp])
        except SystemExit:
            pass
    if args.first in snaps and args.last in snaps:
        diff = snaps[args.last].compare_to(snaps[args.first], "traceback")
        total = sum(d.size_diff for d in diff)
        print(f"traced growth from trial {args.first} to {args.last}: {total} B, "
              f"{total / (args.last - args.first):.0f} B a trial; the biggest:", file=out)
        for d in diff[:15]:
            print(f"{d.size_diff:+9d} B {d.count_diff:+6d} blocks", file=out)
            for line in d.traceback.format()[-8:]:
                print("    " + line, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
