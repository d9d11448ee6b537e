"""The exhaustive crash-points sweep, repeated, optionally against another build, with same-verdict check:

    python bench/sweep.py [-j N] [--repeat R] [--against PYTHONPATH] [--postgres local]

Runs `killpoint explore --scenario crash-points --exhaustive --seed 1` R times (default 3) with this
checkout, and, with `--against`, R times with the `killpoint` package found on that PYTHONPATH, the two in
turn (so both see the same load on a shared machine). Prints each run's schedules per second (the
scenario's own elapsed time, from the summary line), the median per build, the spans of the last run of
each build (bench/spans.py), and whether every run's `verdicts.json` is the same once timings are left out
(same seed, same schedules, same verdicts). A benchmark, not a test: it asserts nothing.

`--against` takes a folder holding a `killpoint` package, e.g. one laid out from `git archive` of an earlier
commit with `harness/` as `killpoint/` and `scenarios`, `fake_services`, `reference_agent` inside it.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spans import SPANS, _fmt, spans  # noqa: E402

SUMMARY = re.compile(r"crash-points\s+(\d+) schedules\s+([\d.]+)s")
TIMINGS = frozenset({"elapsed"})
"""Fields of a verdict that measure time, not outcome."""


def run(jobs: int, out: Path, postgres: str, pythonpath: str | None) -> tuple[float, Path]:
    """One sweep: (schedules per second, run directory)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run([sys.executable, "-m", "killpoint.cli.main", "explore", "--scenario", "crash-points",
                           "--exhaustive", "--seed", "1", "-j", str(jobs), "--quiet", "--no-store",
                           "--postgres", postgres, "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=out.parent, timeout=1800)
    m = SUMMARY.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"the sweep failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    (run_dir,) = list(out.iterdir())
    return int(m.group(1)) / float(m.group(2)), run_dir


def outcome(run_dir: Path) -> str:
    """The run's verdicts without their timings, as canonical JSON."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TIMINGS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return json.dumps(strip(json.loads((run_dir / "verdicts.json").read_text())), sort_keys=True)


def differences(a, b, where: str = "") -> list[tuple[str, object, object]]:
    """Where two JSON values differ (a field one of them lacks counts as None there)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [(where, a, b)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-j", "--jobs", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--against", help="PYTHONPATH holding the other build's killpoint package")
    p.add_argument("--postgres", default="auto")
    args = p.parse_args(argv)
    builds = {"this": None, **({"against": args.against} if args.against else {})}
    rates: dict[str, list[float]] = {b: [] for b in builds}
    last: dict[str, Path] = {}
    outcomes: dict[str, set[str]] = {b: set() for b in builds}
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start, -j {args.jobs}")
    with tempfile.TemporaryDirectory(prefix="kp-sweep-") as tmp:
        for i in range(args.repeat):
            for name, path in builds.items():
                rate, run_dir = run(args.jobs, Path(tmp) / f"{name}-{i}", args.postgres, path)
                rates[name].append(rate)
                last[name] = run_dir
                outcomes[name].add(outcome(run_dir))
                print(f"  {name:<8} run {i + 1}: {rate:5.1f} schedules/s (load {os.getloadavg()[0]:.2f})")
        for name in builds:
            print(f"{name:<8} median {statistics.median(rates[name]):.1f} schedules/s over {args.repeat} runs")
        tables = {name: spans(d / "history.jsonl") for name, d in last.items()}
        width = max(map(len, SPANS))
        print(f"\n{'span (ms: median / p90 (n))':<{width}}  " + "  ".join(f"{n:<24}" for n in tables))
        for span in SPANS:
            print(f"{span:<{width}}  " + "  ".join(f"{_fmt(t.get(span, [])):<24}" for t in tables.values()))
    print()
    for name, seen in outcomes.items():
        print(f"verdicts of {name}: {'the same in every run' if len(seen) == 1 else f'{len(seen)} different sets'}")
    if len(builds) > 1:
        same = len(set.union(*outcomes.values())) == 1
        print(f"verdicts of the two builds: {'the same' if same else 'different'}")
        if not same:
            a, b = (json.loads(next(iter(seen))) for seen in outcomes.values())
            for where, x, y in differences(a, b)[:10]:
                print(f"  {where}: {json.dumps(x)[:120]} vs {json.dumps(y)[:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
