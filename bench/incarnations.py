"""How long an incarnation takes to start: from the fork server vs a fresh interpreter (`--spawn exec`).

    python bench/incarnations.py [--n 10] [--postgres auto]

Both launchers run in this one process, against the same Postgres and kill-point socket. For each, it
times `n` incarnations of the reference worker from the spawn request to

- `worker.start`: the worker's first note (its interpreter is up and the agent imported), and
- `step.start`: its first kill point (connected, schema checked, lease taken, checkpoint loaded),

and prints the medians with exec as the baseline (ratio 1.00); the fork launcher twice, with its standby
(a child forked ahead with its session open, as the harness runs it) and without. It then times one crash-free run of the
reference agent through the whole harness (fork launcher), and the environment start before it; then
`n` crash-free runs with kill points on and `n` with them off (`KILLPOINT_SOCKET` empty), in turn: the
instrumentation's overhead without an interpreter's start in either.
A benchmark, not a test: it asserts nothing and its figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from killpoint.env.barrier import BarrierServer
from killpoint.env.environment import Environment
from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import Launcher
from killpoint.env.postgres import provide
from killpoint.env.stepmodule import DEFAULT_STEPS, load
from killpoint.faults.schedule import Schedule
from killpoint.reference_agent.schema import ensure_schema
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.run.trial import Session


class Clock:
    """Kill-point server side: notes the time of each incarnation's first note and first point (which
    it never releases: the worker is killed there)."""

    def __init__(self, path: Path) -> None:
        self.first: dict[tuple[str, str], float] = {}
        self.seen = threading.Condition()
        self.server = BarrierServer(path, self._point, self._note)

    def _record(self, inc: str, what: str) -> None:
        with self.seen:
            self.first.setdefault((inc, what), time.perf_counter())
            self.seen.notify_all()

    def _note(self, msg: dict) -> None:
        if msg.get("note") == "worker.start":
            self._record(msg["incarnation"], "worker.start")

    def _point(self, msg: dict) -> bool:
        self._record(msg["incarnation"], "step.start")
        return False  # held until killed

    def wait(self, inc: str, what: str, timeout: float = 60) -> float:
        with self.seen:
            if not self.seen.wait_for(lambda: (inc, what) in self.first, timeout):
                raise TimeoutError(f"{inc} never reached {what}")
            return self.first[(inc, what)]


SERVICE_URLS = {var: f"http://127.0.0.1:9/{name}" for var, name in
                (("MAILER_URL", "mailer"), ("LEDGER_URL", "ledger"), ("WEBHOOK_URL", "webhook"),
                 ("ANTHROPIC_BASE_URL", "model"))}
"""Plain-http service URLs, as the harness gives every incarnation (its fakes): the worker builds its clients
for them (and takes the fork server's ready-made ones) without loading a CA bundle. Never called: the
worker is killed at its first kill point, before any request."""


def time_launcher(name: str, launcher: Launcher, clock: Clock, dsn: str, n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"worker.start": [], "step.start": []}
    for i in range(n):
        inc_id = f"{name}-{i}#1"
        env = {**os.environ, "DATABASE_URL": dsn, "KILLPOINT_SOCKET": str(clock.server.path),
               "KILLPOINT_INCARNATION": inc_id, "KILLPOINT_WORKER_ID": inc_id, **SERVICE_URLS}
        t0 = time.perf_counter()
        inc = launcher.spawn(inc_id, f"{name}-{i}", "worker", [f"{name}-{i}"], env, None)
        for what in out:
            out[what].append(clock.wait(inc_id, what) - t0)
        inc.send(signal.SIGKILL)
        inc.ended.wait(timeout=10)
    return out


def overhead(session: Session, n: int) -> tuple[list[float], list[float]]:
    """Seconds of `n` crash-free runs with kill points on (every point a round trip to the harness) and `n`
    with them off (`KILLPOINT_SOCKET` empty: each point is a no-op), in turn, forked, on one session."""
    on: list[float] = []
    off: list[float] = []
    for _ in range(n):
        for label, extra, out in (("on", {}, on), ("off", {"KILLPOINT_SOCKET": ""}, off)):
            t = time.perf_counter()
            session.drive(session.next_run_id(f"overhead-{label}"), Schedule(), RunOptions(extra_env=extra))
            out.append(time.perf_counter() - t)
    return on, off


def line(label: str, values: list[float], base: float) -> str:
    med = statistics.median(values)
    return (f"  {label:<18} median {med * 1000:8.1f} ms  min {min(values) * 1000:8.1f} ms  "
            f"ratio {med / base:5.3f} vs exec ({base / med:6.1f}x faster)" if label != "exec" else
            f"  {label:<18} median {med * 1000:8.1f} ms  min {min(values) * 1000:8.1f} ms  ratio 1.000 (baseline)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10, help="incarnations per launcher (default 10)")
    p.add_argument("--postgres", default="auto", help="Postgres provider (default auto)")
    args = p.parse_args(argv)
    with provide(kind=args.postgres) as pg, tempfile.TemporaryDirectory(prefix="kp-bench-") as tmp:
        os.chmod(tmp, 0o755)
        dsn = pg.create_database("bench_incarnations")
        clock = Clock(Path(tmp) / "kp.sock")
        t = time.perf_counter()
        fork = ForkLauncher([DEFAULT_STEPS])
        fork_ready = time.perf_counter() - t
        bare = ForkLauncher([DEFAULT_STEPS], standby=False)
        execl = ExecLauncher()
        try:
            results = {"exec": time_launcher("exec", execl, clock, dsn, args.n),
                       "fork (standby)": time_launcher("fork", fork, clock, dsn, args.n),
                       "fork (no standby)": time_launcher("bare", bare, clock, dsn, args.n)}
        finally:
            fork.close()
            bare.close()
            execl.close()
            clock.server.close()
        print(f"incarnation start, {args.n} each (fork server itself ready in {fork_ready:.2f} s, once per session)")
        for what, meaning in (("worker.start", "interpreter up, agent imported"),
                              ("step.start", "connected, lease taken, at its first step")):
            base = statistics.median(results["exec"][what])
            print(f" spawn -> {what} ({meaning})")
            for name in results:
                print(line(name, results[name][what], base))

        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        history = History(run_dir / "history.jsonl")
        t = time.perf_counter()
        with Environment(postgres="dsn", dsn=pg.create_database("bench_run"), allow_any_dsn=True,
                         preload=[DEFAULT_STEPS], run_dir=run_dir, schema=ensure_schema) as env:
            started = time.perf_counter() - t
            session = Session(env, history, load(DEFAULT_STEPS), RunOptions())
            t = time.perf_counter()
            base = session.baseline()
            took = time.perf_counter() - t
            on, off = overhead(session, args.n)
        history.close()
        print(f"crash-free run (fork launcher, {len(base.incarnations)} incarnation, "
              f"{sum(1 for e in base.events if e['type'] == 'point')} kill points passed): {took:.2f} s "
              f"(environment start before it: {started:.2f} s)")
        print(f"kill points on / off (crash-free runs, fork launcher, median of {args.n} each, in turn): "
              f"{statistics.median(on) / statistics.median(off):.2f} ({statistics.median(on) * 1000:.1f} / "
              f"{statistics.median(off) * 1000:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
