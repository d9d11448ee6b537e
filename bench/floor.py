"""The floor of a schedule's CPU: what the primitives of a random crash-points schedule cost, against
what a schedule costs.

    python bench/floor.py [--n 200] [--random 120] [--seed 1] [--postgres local]

Issue 28 asks for 50 random multi-fault schedules/s at -j 2 on two cores, <= 40 ms of CPU per schedule over
every process, and reckons the primitives put the floor of a schedule "well under 20 ms". This measures it.

1. Counts and CPU of real schedules: two explorations (`killpoint explore --scenario crash-points --random R
   -j 1 --seed S --no-store`, then the same with R/6), this process a child subreaper so the detached
   postmaster's CPU is counted with the rest (`RUSAGE_CHILDREN`). CPU per schedule is the difference of the
   two runs' CPU over the difference of their schedules (a session's start-up cancels out). Per schedule,
   from the longer run's history.jsonl: incarnations (`inc.start`), kill-point round trips a worker made
   (its four points), checkpoint writes, model requests, effect requests (`effect.received`).
2. Each primitive `n` times in a row in this process (commits 10 n), the mean CPU of every process it involves (this one's user +
   system, the children it reaped, a Postgres backend's own, or the postmaster's reaped children):
   - `fork + exit`: a fork of this interpreter preloaded as a fork server is (the anthropic SDK, psycopg,
     httpx2, the reference agent; `gc.freeze`; its heap on huge pages, `procutil.huge_heap`), the child
     exiting at once;
   - `session`: a Postgres session opened and closed (client, and the backend the postmaster reaps);
   - `commit`: one checkpoint-sized upsert committed (client and backend);
   - `model call`: one `messages.create` through the SDK to the fake model (client and the fake's handler
     thread, both here);
   - `effect call`: one keyed POST to the fake mailer through httpx2;
   - `kill point`: one report-and-answer over the kill-point socket (a `BarrierServer` here, the reference
     runtime's client in a forked child).
   Besides, not in the floor: `first write, audit trigger`, a session whose first statement is a checkpoint
   write into a table with killpoint's audit trigger (harness/env/audit.py), less the same into a table
   without it (what the trigger costs an incarnation: PL/pgSQL compiled and its INSERT planned in each new
   backend).
3. The floor: the sum of count x cost, printed beside the measured CPU per schedule and the target's
   budget. It leaves out everything that is not one of these primitives (the runtime's and the harness's
   own Python: the lease, the history, the checkers), so it is a lower bound of this design.

A benchmark, not a test: it asserts nothing; its figures depend on the machine and its load (printed).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shards import children_cpu, reap, subreaper  # noqa: E402

WORKER_POINTS = ("step.start", "effect.responded", "checkpoint.writing", "checkpoint.committed")
BUDGET_MS = 40.0
"""50 schedules/s on two cores: 2 CPU-seconds / 50."""


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def explore(random: int, seed: int, postgres: str, out: Path) -> tuple[float, Path]:
    """Flow step 1: one exploration's CPU over its whole process tree, and its run directory."""
    before = children_cpu()
    subprocess.run([sys.executable, "-m", "killpoint.cli.main", "explore", "--scenario", "crash-points",
                    "--random", str(random), "--seed", str(seed), "-j", "1", "--no-store", "--quiet",
                    "--postgres", postgres, "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    reap()
    return children_cpu() - before, next(out.glob("*/history.jsonl")).parent


def counts(run_dir: Path) -> dict[str, float]:
    """Flow step 1: the primitives per schedule in a run directory's history."""
    kinds: Counter[str] = Counter()
    runs: set[str] = set()
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        e = json.loads(line)
        rid = str(e.get("run_id", ""))
        if not rid.startswith("crash-points-"):
            continue  # the baselines
        runs.add(rid)
        if e["type"] == "inc.start":
            kinds["fork + exit"] += 1
            kinds["session"] += 1
        elif e["type"] == "checkpoint.write":
            kinds["commit"] += 1
        elif e["type"] == "point":
            point = e.get("point")
            if point in WORKER_POINTS:
                kinds["kill point"] += 1
            elif point == "model.request":
                kinds["model call"] += 1
            elif point == "effect.received":
                kinds["effect call"] += 1
    return {k: v / max(1, len(runs)) for k, v in kinds.items()}


def timed(n: int, once: Callable[[], object], other: Callable[[], float] = lambda: 0.0) -> float:
    """CPU milliseconds of one call of `once`: this process's CPU, its reaped children's and `other()`'s
    (another process's counter, in clock ticks: hence a batch of `n` calls, not a median of single ones)."""
    s, c, o = own_cpu(), children_cpu(), other()
    for _ in range(n):
        once()
    return (own_cpu() - s + children_cpu() - c + other() - o) / n * 1000


def fork_exit() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def postmaster_reaped(pm: psutil.Process) -> float:
    """The CPU of the backends the postmaster has reaped (each backend is its child)."""
    t = pm.cpu_times()
    return t.children_user + t.children_system


def primitives(n: int, dsn: str) -> dict[str, float]:
    """Flow step 2: median CPU ms of each primitive."""
    import anthropic  # noqa: PLC0415 - what a fork server preloads, imported here as it does
    import httpx2  # noqa: PLC0415
    import psycopg  # noqa: PLC0415

    import killpoint.reference_agent.worker  # noqa: F401, PLC0415
    from killpoint.env.barrier import BarrierServer  # noqa: PLC0415
    from killpoint.env.procutil import huge_heap  # noqa: PLC0415
    from killpoint.fake_services import Services  # noqa: PLC0415
    from killpoint.reference_agent import killpoints  # noqa: PLC0415

    cost: dict[str, float] = {}
    gc.collect()
    gc.freeze()
    huge_heap()  # as the fork server does once it has preloaded
    cost["fork + exit"] = timed(n, fork_exit)

    with psycopg.connect(dsn, autocommit=True) as conn:
        pm = psutil.Process(conn.execute("SELECT pg_backend_pid()").fetchone()[0]).parent()  # type: ignore[index]
        conn.execute("CREATE TABLE IF NOT EXISTS floor_checkpoints (run_id text PRIMARY KEY, seq int, state jsonb)")
        backend = psutil.Process(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        state = json.dumps({"window": [{"role": "user", "content": "x" * 60}] * 8, "cost_usd": 0.01})

        def commit() -> None:
            conn.execute("INSERT INTO floor_checkpoints VALUES ('r', 1, %s) ON CONFLICT (run_id) DO UPDATE "
                         "SET seq = floor_checkpoints.seq + 1, state = EXCLUDED.state", (state,))
        cost["commit"] = timed(10 * n, commit, lambda: sum(backend.cpu_times()[:2]))  # ~0.1 ms: more of them

        def reaped() -> float:
            time.sleep(0.2)  # the last backend's exit is reaped a moment after its close
            return postmaster_reaped(pm)
        cost["session"] = timed(n, lambda: psycopg.connect(dsn).close(), reaped)

        from killpoint.env.audit import AUDIT_SQL  # noqa: PLC0415
        for table in ("floor_plain", "floor_audited"):
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (run_id text PRIMARY KEY, seq bigint NOT NULL, "
                         "status text NOT NULL, data jsonb NOT NULL)")
        conn.execute(AUDIT_SQL.format(table="floor_audited"))
        first: dict[str, float] = {}
        for table in ("floor_plain", "floor_audited"):
            def first_write(table: str = table) -> None:
                with psycopg.connect(dsn) as c:
                    c.execute(f"INSERT INTO {table} VALUES (gen_random_uuid()::text, 1, 'running', "
                              "'{\"cursor\": \"email\"}')")
            first[table] = timed(n, first_write, reaped)
        cost["first write, audit trigger"] = first["floor_audited"] - first["floor_plain"]

    svc = Services.start()
    try:
        http = httpx2.Client(timeout=10)
        sdk = anthropic.Anthropic(base_url=svc.url("model", "floor"), api_key="test",
                                  http_client=anthropic.DefaultHttpxClient(verify=False), max_retries=0)
        msgs = [{"role": "user", "content": "Draft a short reminder for invoice 7."}]

        cost["model call"] = timed(n, lambda: sdk.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, messages=msgs))  # type: ignore[arg-type]
        mailer = svc.url("mailer", "floor") + "/v1/emails"
        keys = iter(range(10**9))

        cost["effect call"] = timed(n, lambda: http.post(
            mailer, json={"to": "a@example.com", "template": "t", "data": {}},
            headers={"Idempotency-Key": f"k-{next(keys)}"}))
        http.close()
    finally:
        svc.stop()

    with tempfile.TemporaryDirectory(prefix="kp-floor-") as tmp:
        path = Path(tmp) / "kp.sock"
        with BarrierServer(path, on_point=lambda msg: True, on_note=lambda msg: None):
            parent, child = socket.socketpair()
            s = own_cpu()
            pid = os.fork()
            if pid == 0:
                os.environ["KILLPOINT_SOCKET"], os.environ["KILLPOINT_INCARNATION"] = str(path), "floor#1"
                killpoints.report("step.start", run_id="floor", step="plan", seq=0)  # the connection, apart
                t = time.process_time()
                for _ in range(n):
                    killpoints.report("step.start", run_id="floor", step="plan", seq=0)
                child.sendall(json.dumps(time.process_time() - t).encode() + b"\n")
                os._exit(0)
            worker = json.loads(parent.makefile("rb").readline())
            os.waitpid(pid, 0)
            harness = own_cpu() - s
            parent.close()
            child.close()
        # The child's loop, and the harness's side: this process's CPU over the child's whole life (the fork
        # included: an upper bound), spread over the n + 1 reports.
        cost["kill point"] = (worker / n + harness / (n + 1)) * 1000
    return cost


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=200, help="repetitions of each primitive (default 200)")
    p.add_argument("--random", type=int, default=120, help="schedules of the longer exploration (default 120)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--postgres", default="local", help="Postgres provider (default local)")
    args = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    subreaper()
    short = max(1, args.random // 6)
    with tempfile.TemporaryDirectory(prefix="kp-floor-") as tmp:
        long_cpu, run_dir = explore(args.random, args.seed, args.postgres, Path(tmp) / "long")
        per = counts(run_dir)
        short_cpu, _ = explore(short, args.seed + 1, args.postgres, Path(tmp) / "short")
    measured = (long_cpu - short_cpu) / (args.random - short) * 1000

    from killpoint.env.postgres import provide  # noqa: PLC0415
    with provide(kind=args.postgres) as pg:
        cost = primitives(args.n, pg.create_database("bench_floor"))
    reap()

    print(f"\nprimitives of a random crash-points schedule ({args.random} schedules, seed {args.seed}; "
          f"each primitive's CPU the mean of {args.n} in a row, commits {10 * args.n})")
    print(f"{'primitive':>14} {'CPU ms each':>12} {'per schedule':>13} {'ms per schedule':>16}")
    floor = 0.0
    for name in ("fork + exit", "session", "commit", "model call", "effect call", "kill point"):
        ms = cost[name] * per.get(name, 0.0)
        floor += ms
        print(f"{name:>14} {cost[name]:>12.2f} {per.get(name, 0.0):>13.1f} {ms:>16.1f}")
    print(f"{'':>14} (not in the floor) a backend's first checkpoint write, with the audit trigger less without: "
          f"{cost['first write, audit trigger']:.2f} ms, x {per.get('fork + exit', 0.0):.1f} incarnations")
    print(f"\n  floor (the primitives alone): {floor:6.1f} ms per schedule -> at most "
          f"{2000 / floor:.0f} schedules/s on two cores")
    print(f"  measured (whole tree, start-up removed): {measured:6.1f} ms per schedule -> "
          f"{2000 / measured:.1f} schedules/s on two cores at full use")
    print(f"  the rest (the runtime's and the harness's own work): {measured - floor:6.1f} ms per schedule")
    print(f"  the target's budget: {BUDGET_MS:.0f} ms per schedule (50/s on two cores)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
