"""Where a session's start-up goes, before its first trial (issue 28: "start-up of a session <= 1 s"):

    python bench/startup.py [--n 5] [--served] [-- KILLPOINT ARGS...]

Runs `killpoint ARGS` (default: one replay, `replay --scenario crash-points --schedule
email:effect.applied:kill`) N times, each in a child interpreter that times the phases of start-up from
inside (it wraps the functions below, then calls the CLI's `main`), and prints the median of each phase in
milliseconds from the child's start, the time to the first trial (`run.begin`), the whole wall time, and
the CPU (user + system) of the child and everything it waited for (fork servers, Postgres, workers):

- `imports`: the CLI's own imports, until `main` is called;
- `load`: the step module loaded (`stepmodule.load`, first call: a user's module checked by the first fork
  server's import of it, or by a child of its own without fork servers; killpoint's own imported here),
  inside `env` since session 39, while the fork servers import it;
- `env`: `Environment._start` as a whole, and within it `postgres` (`LocalServer.start`: the template's
  copy, the server's start, the run database) and `forks wait` (the time `ForkLauncher.ready` waited for
  the fork servers' import of the agent, started before the load and Postgres so that all go at once);
- `prepare`: the agent's schema (`Session.prepare`);
- `first trial`: the first `run.begin` journalled;
- `teardown`: `Environment.__exit__` (workers, fake services, Postgres stopped, folders removed).

With `--served`, the same runs again against a `killpoint serve` started here (harness/cli/serve.py): its
zygotes named in the child's environment and its database as `--dsn`; both tables are printed, and the
ratio of the time to the first trial, plain / served. The served CPU is the session's own: the zygotes'
and the served Postgres's work is not the child's (nor are the fork servers the zygotes fork for it).

A benchmark, not a test: it asserts nothing; its figures depend on the machine and its load (printed).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

DEFAULT = ["replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill"]
PHASES = ("imports", "load", "postgres", "forks wait", "env", "prepare", "first trial", "teardown")
MARK = "KILLPOINT_STARTUP_BENCH "


def _child(args: list[str]) -> None:
    """In the child: wrap the phases, run the CLI, print one JSON line of phase ends (ms) on stderr."""
    t0 = time.monotonic()
    ends: dict[str, float] = {}
    spans: dict[str, float] = {}

    def ms() -> float:
        return round((time.monotonic() - t0) * 1000, 1)

    def wrap(module: str, attr: str, name: str, span: bool = False) -> None:
        owner = importlib.import_module(module)
        *path, last = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, last)

        @functools.wraps(original)
        def timed(*a: object, **k: object) -> object:
            start = time.monotonic()
            try:
                return original(*a, **k)
            finally:
                if name not in ends:
                    ends[name] = ms()
                    if span:
                        spans[name] = round((time.monotonic() - start) * 1000, 1)

        setattr(owner, last, timed)

    from killpoint.cli.main import main  # noqa: PLC0415 - the imports are the first phase
    from killpoint.run.history import History  # noqa: PLC0415

    ends["imports"] = ms()
    wrap("killpoint.env.stepmodule", "load", "load")
    wrap("killpoint.env.postgres.local", "LocalServer.start", "postgres", span=True)
    wrap("killpoint.env.fork_launcher", "ForkLauncher.ready", "forks wait", span=True)
    wrap("killpoint.env.environment", "Environment._start", "env")
    wrap("killpoint.run.trial", "Session.prepare", "prepare")
    wrap("killpoint.env.environment", "Environment.__exit__", "teardown", span=True)
    append = History.append

    def first_trial(self: History, kind: str, **fields: object) -> object:
        if kind == "run.begin" and "first trial" not in ends:
            ends["first trial"] = ms()
        return append(self, kind, **fields)

    History.append = first_trial  # type: ignore[method-assign]
    code = 0
    try:
        code = main(args) or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        print(MARK + json.dumps({"ends": ends, "spans": spans, "code": code}), file=sys.stderr, flush=True)
    sys.exit(code)


def _one(args: list[str], out: str, env: dict[str, str] | None = None) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, __file__, "--child", *args, "--out", out, "--quiet"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        raise SystemExit(f"the child printed no figures (exit {proc.returncode}): {proc.stderr[-2000:]}")
    got = json.loads(line[len(MARK):])
    got["wall"] = round(wall * 1000, 1)
    got["cpu"] = round((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000, 1)
    return got


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=5, help="runs (the medians are printed)")
    p.add_argument("--served", action="store_true", help="also against a `killpoint serve` (see the module doc)")
    p.add_argument("args", nargs="*", help="the killpoint command (after --)")
    ns = p.parse_args(argv)
    args = ns.args or DEFAULT
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    print(f"killpoint {' '.join(args)}  (x{ns.n})")
    with tempfile.TemporaryDirectory(prefix="kp-startup-") as tmp:
        plain = [_one(args, os.path.join(tmp, str(k))) for k in range(ns.n)]
        _table(plain)
        if not ns.served:
            return 0
        with _served() as (env, dsn):
            served = [_one([*args, "--dsn", dsn], os.path.join(tmp, f"s{k}"), env) for k in range(ns.n)]
    print("served (killpoint serve: its zygotes and its database):")
    _table(served)
    ratio = statistics.median(r["ends"]["first trial"] for r in plain) / statistics.median(
        r["ends"]["first trial"] for r in served)
    print(f"first trial, plain / served: {ratio:.2f}x")
    return 0


@contextlib.contextmanager
def _served() -> Iterator[tuple[dict[str, str], str]]:
    """A `killpoint serve` for the block: the environment naming its zygotes, and its `--dsn`."""
    from killpoint.cli.serve import parse_ready  # noqa: PLC0415
    from killpoint.env.zygote import ZYGOTE_VAR  # noqa: PLC0415

    proc = subprocess.Popen([sys.executable, "-m", "killpoint.cli.main", "serve", "--postgres", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        ready = parse_ready(proc.stdout)  # it prints its ready lines once its zygotes listen
        if ready is None:
            raise SystemExit(f"killpoint serve did not get ready (exit {proc.poll()})")
        folder, dsn = ready
        yield {**os.environ, ZYGOTE_VAR: folder}, dsn
    finally:
        proc.send_signal(signal.SIGTERM)  # as Ctrl-C does (a SIGINT may be ignored where this bench runs in the background)
        proc.wait(timeout=60)


def _table(runs: list[dict]) -> None:
    print(f"{'phase':<14}{'ends at (ms)':>14}{'takes (ms)':>12}")
    for phase in PHASES:
        ends = [r["ends"][phase] for r in runs if phase in r["ends"]]
        spans = [r["spans"][phase] for r in runs if phase in r["spans"]]
        if ends:
            took = f"{statistics.median(spans):>12.0f}" if spans else ""
            print(f"{phase:<14}{statistics.median(ends):>14.0f}{took}")
    print(f"{'wall':<14}{statistics.median(r['wall'] for r in runs):>14.0f}")
    print(f"{'CPU, all':<14}{statistics.median(r['cpu'] for r in runs):>14.0f}  (the child and every process it waited for)")
    codes = sorted({r['code'] for r in runs})
    print(f"exit codes: {codes}")


if __name__ == "__main__":
    sys.exit(main())
