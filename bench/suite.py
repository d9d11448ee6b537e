"""The test suite with and without zygotes: what the fork servers', probes' and CLIs' imports cost the suite.

    python bench/suite.py [--paths tests/cli] [-n 2] [-m EXPR] [--repeat 1] [--order zygote,none]

(`--paths tests -m 'not slow' --order zygote`: the edit loop's selection, as the README gives it.)

Runs `python -m pytest -q -p no:randomly -n N PATHS` once per mode and repeat, one after the other in this
process: `zygote` (the default: tests/conftest.py's zygotes fork every session's fork servers and step
module probes, harness/env/zygote.py, and the sandbox's CLI runs, tests/helpers/sandbox.py), `fresh-cli`
(`KILLPOINT_TEST_FORKED_CLI=0`: the zygotes, but every CLI a fresh interpreter) and `none`
(`KILLPOINT_TEST_ZYGOTE=0`: every session starts its own).
For each run it prints the wall time, the CPU of the whole process tree (user + system, from
`RUSAGE_CHILDREN`: every descendant is reaped by its parent, so the tree's CPU adds up here) and pytest's
summary line; then each mode's median and the ratio zygote / none. A benchmark, not a test: it asserts
nothing, and its figures depend on the machine and its load (say the load with the figures).

    python bench/suite.py --by-file [--paths tests] [-n 2] [--top 30]

runs the suite once (`zygote` mode) with `bench/cpu_by_test.py` loaded, and prints where its CPU went: by
folder of tests/, then the files and the tests that cost most, each with its wall time (what the zygotes'
servers and the session's Postgres did for a test counted under that test, not at the session's end).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import cpu_by_test  # noqa: E402


def run(paths: list[str], workers: int, mode: str, marker: str | None = None,
        plugin: list[str] | None = None, extra_env: dict[str, str] | None = None) -> tuple[float, float, str]:
    env = {**os.environ, **(extra_env or {})}
    env.pop("KILLPOINT_ZYGOTE", None)
    env.pop("KILLPOINT_TEST_FORKED_CLI", None)
    if mode == "none":
        env["KILLPOINT_TEST_ZYGOTE"] = "0"
    else:
        env.pop("KILLPOINT_TEST_ZYGOTE", None)
    if mode == "fresh-cli":
        env["KILLPOINT_TEST_FORKED_CLI"] = "0"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    select = ["-m", marker] if marker else []
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-n", str(workers), "--dist",
                           "loadfile", *(plugin or []), *select, *paths],
                          env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return wall, cpu, lines[-1] if lines else f"exit {proc.returncode}"


def by_file(paths: list[str], workers: int, marker: str | None, top: int) -> None:
    """`--by-file`: one run with the per-test CPU plugin, and its figures by folder, file and test."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cpu.jsonl"
        wall, cpu, summary = run(paths, workers, "zygote", marker, ["-p", "bench.cpu_by_test"],
                                 {cpu_by_test.OUT: str(out)})
        rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    print(f"  wall {wall:.1f} s  CPU {cpu:.1f} s  ({summary}; load {os.getloadavg()[0]:.1f})")
    counted = sum(r["cpu"] for r in rows)
    print(f"{len(rows)} tests: {counted:.1f} CPU-s counted in tests ({counted / cpu:.0%} of the run's), the rest in "
          "collection, fixtures' set-up and the workers' own start")
    groups: dict[str, dict[str, list[float]]] = {"folder": {}, "file": {}}
    for r in rows:
        file = r["id"].split("::")[0]
        for kind, key in (("folder", "/".join(file.split("/")[:2])), ("file", file)):
            acc = groups[kind].setdefault(key, [0.0, 0.0, 0])
            acc[0] += r["cpu"]
            acc[1] += r["wall"]
            acc[2] += 1
    for kind, limit in (("folder", None), ("file", top)):
        print(f"\nby {kind}: CPU-s, wall-s, tests")
        for key, (c, w, n) in sorted(groups[kind].items(), key=lambda kv: -kv[1][0])[:limit]:
            print(f"  {c:8.1f} {w:8.1f} {n:5d}  {key}")
    print("\ntests: CPU-s, wall-s")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(f"  {r['cpu']:8.1f} {r['wall']:8.1f}  {r['id']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default="tests/cli", help="comma-separated test paths (default tests/cli)")
    parser.add_argument("-n", type=int, default=2, help="pytest-xdist workers (default 2)")
    parser.add_argument("-m", dest="marker", default=None, help="pytest's -m expression, e.g. 'not slow'")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--order", default="zygote,none", help="the modes, in the order they run")
    parser.add_argument("--by-file", action="store_true", help="one run: its CPU by folder, file and test")
    parser.add_argument("--top", type=int, default=30, help="files and tests to list with --by-file")
    args = parser.parse_args()
    paths = args.paths.split(",")
    if args.by_file:
        print(f"pytest -n {args.n} {' '.join(paths)} with bench/cpu_by_test.py; load {os.getloadavg()[0]:.1f}")
        by_file(paths, args.n, args.marker, args.top)
        return
    modes = args.order.split(",")
    figures: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    select = f"-m '{args.marker}' " if args.marker else ""
    print(f"pytest -n {args.n} {select}{' '.join(paths)}; load average {os.getloadavg()[0]:.1f} at the start")
    for r in range(args.repeat):
        for mode in modes:
            wall, cpu, summary = run(paths, args.n, mode, args.marker)
            figures[mode].append((wall, cpu))
            print(f"  {mode:9s} #{r + 1}: wall {wall:7.1f} s  CPU {cpu:7.1f} s  ({summary}; load {os.getloadavg()[0]:.1f})",
                  flush=True)
    for mode in modes:
        walls, cpus = zip(*figures[mode], strict=True)
        print(f"{mode:9s} median: wall {statistics.median(walls):7.1f} s  CPU {statistics.median(cpus):7.1f} s")
    for base in ("none", "fresh-cli"):
        if {"zygote", base} <= set(figures):
            z = [statistics.median(x) for x in zip(*figures["zygote"], strict=True)]
            n = [statistics.median(x) for x in zip(*figures[base], strict=True)]
            print(f"zygote / {base}: wall {z[0] / n[0]:.2f}  CPU {z[1] / n[1]:.2f}")


if __name__ == "__main__":
    main()
