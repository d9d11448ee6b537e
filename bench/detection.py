"""Detection power: how fast the harness finds each mutant agent (tests/gallery/mutants/), exhaustively and
at random.

For every mutant of the gallery, in the scenario that exercises it:

- exhaustive: the scenario's own plan of single faults (its `exhaustive()`), in its order, stopped at the
  first trial a checker fails;
- random: the scenario's random schedules from seeds of base seed `--seed` (its `random()`), stopped at the
  first failure, or after `--random N` schedules (then reported as not found).

Each (mutant, mode) runs in a fresh process with its own harness session: a runtime mutant patches the
reference runtime at import, so two mutants must never share a process or a fork server. Seconds are wall
time from the session's first trial (the crash-free baseline included) to the end of the first failing trial.

    python bench/detection.py                     # every mutant, a markdown table on stdout
    python bench/detection.py --mutant no_key     # some of them
    python bench/detection.py --random 20 --seed 3
    python bench/detection.py --plain 10          # and the column: caught by a plain `killpoint run --steps`

Run it from the repository root (the mutants are imported as `tests.gallery.mutants.*`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from tests.gallery.mutants import BY_NAME, MUTANTS, Mutant  # noqa: E402


class Detected(Exception):
    """Raised out of a scenario's plan at the first failing trial."""


@dataclass
class Found:
    """What one (mutant, mode) measurement gave: schedules tried, seconds, and the first failing trial."""

    tried: int = 0
    seconds: float | None = None
    checker: str = ""
    schedule: str = ""
    error: str = ""


def _split_args(m: Mutant) -> tuple[list[str], int | None]:
    """The mutant's scenario arguments without `--seed` (which the measurement chooses), and that seed."""
    out, seed, args = [], None, list(m.args)
    while args:
        flag, value = args.pop(0), args.pop(0)
        if flag == "--seed":
            seed = int(value)
        else:
            out += [flag, value]
    return out, seed


def measure(name: str, mode: str, count: int, seed: int, out: str) -> Found:
    """In this process: one session on the mutant, the scenario's plan in `mode`, stopped at a failure."""
    from killpoint.cli import commands, parsers
    from killpoint.run.scenario import Context, find

    m = BY_NAME[name]
    extra, _ = _split_args(m)
    parser = argparse.ArgumentParser()
    parsers.add_parsers(parser.add_subparsers())
    args = parser.parse_args(["explore", "--scenario", m.scenario, "--random", str(count), "--seed", str(seed),
                              "--steps", m.module, "--quiet", "--out", out, *extra])
    scenario = find(m.scenario)
    found = Found()
    with commands.session(commands.invocation(args, "explore", f"detect-{name}-{mode}")) as s:
        ctx = Context(session=s, seed=seed, previous_steps=args.previous_steps)
        started = time.monotonic()
        hook = "round" if hasattr(scenario, "round") else "trial"  # one call per schedule tried

        def watch(method):  # type: ignore[no-untyped-def]
            def run(*a, **kw):  # type: ignore[no-untyped-def]
                result = method(*a, **kw)
                found.tried += 1
                for t in result if isinstance(result, list) else [result]:
                    if t.outcome == "fail":
                        found.seconds = time.monotonic() - started
                        found.checker = ",".join(v.checker for v in t.failing())
                        found.schedule = str(t.schedule) or f"seed {t.seed}"
                        raise Detected
                return result
            return run

        setattr(scenario, hook, watch(getattr(scenario, hook)))
        try:
            if mode == "exhaustive":
                scenario.exhaustive(ctx)
            else:
                scenario.random(ctx, count)
        except Detected:
            pass
    return found


def child(name: str, mode: str, count: int, seed: int) -> Found:
    """Measure in a fresh process (see the module docstring) and read its JSON answer."""
    with tempfile.TemporaryDirectory(prefix="killpoint-detect-") as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                                             if p)}
        proc = subprocess.run([sys.executable, __file__, "--child", name, mode, "--random", str(count),
                               "--seed", str(seed), "--out", tmp], capture_output=True, text=True, cwd=REPO,
                              env=env, stdin=subprocess.DEVNULL, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return Found(error=(proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
    return Found(**json.loads(lines[-1]))


def plain(m: Mutant, seed: int, budget: float) -> str:
    """Whether a plain `killpoint run --steps MUTANT` (every scenario, no other flag but the seed and the
    random budget that make it repeatable) fails: "yes (checkers)" or "no", with its wall time."""
    with tempfile.TemporaryDirectory(prefix="killpoint-plain-") as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                                             if p)}
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "killpoint.cli.main", "run", "--steps", m.module,
                               "--seed", str(seed), "--budget", f"{budget:g}", "--no-store"],
                              capture_output=True, text=True, cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                              timeout=7200)
        took = time.monotonic() - started
    failing = sorted({ln.split(":")[0].strip() for ln in proc.stdout.splitlines()
                      if ln.startswith("  ") and ": fail:" in ln})
    if proc.returncode == 1:
        return f"yes ({', '.join(failing) or 'fail'}; {took:.0f}s)"
    return f"no (exit {proc.returncode}; {took:.0f}s)"


def cell(f: Found, limit: int | None = None) -> str:
    if f.error:
        return f"error: {f.error[:60]}"
    if f.seconds is None:
        return f"not found in {f.tried}" + (f" (of {limit})" if limit else "")
    return f"{f.tried} / {f.seconds:.1f}s"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/detection.py", description=__doc__.split("\n")[0])
    p.add_argument("--mutant", action="append", choices=sorted(BY_NAME), help="only these (repeatable)")
    p.add_argument("--random", type=int, default=30, metavar="N", help="random schedules at most (default 30)")
    p.add_argument("--seed", type=int, default=1, help="base seed of the random mode (default 1)")
    p.add_argument("--plain", type=float, default=None, metavar="BUDGET",
                   help="add the column: caught by a plain `killpoint run --steps` (every scenario; BUDGET seconds "
                        "of random exploration per scenario); slow: one whole run per mutant")
    p.add_argument("--child", nargs=2, metavar=("MUTANT", "MODE"), help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        name, mode = args.child
        print(json.dumps(measure(name, mode, args.random, args.seed, args.out).__dict__), flush=True)
        return 0
    chosen = [BY_NAME[n] for n in args.mutant] if args.mutant else list(MUTANTS)
    print(f"Detection of {len(chosen)} mutants: schedules tried / seconds to the first failing trial "
          f"(random: at most {args.random} schedules from base seed {args.seed}).\n")
    extra = " caught by a plain `killpoint run --steps` |" if args.plain is not None else ""
    print("| mutant | scenario | exhaustive | random | caught by (exhaustive) | first failing schedule |" + extra)
    print("| --- | --- | --- | --- | --- | --- |" + (" --- |" if extra else ""))
    missed = 0
    for m in chosen:
        ex = child(m.name, "exhaustive", args.random, args.seed)
        rnd = child(m.name, "random", args.random, args.seed)
        missed += ex.seconds is None
        column = f" {plain(m, args.seed, args.plain)} |" if args.plain is not None else ""
        print(f"| {m.name} | {m.scenario} | {cell(ex)} | {cell(rnd, args.random)} | {ex.checker or '-'} | "
              f"`{ex.schedule or '-'}` |{column}", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
