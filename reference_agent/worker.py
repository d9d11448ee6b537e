"""The worker process: one incarnation of the agent.

Usage::

    python -m killpoint.reference_agent.worker RUN_ID            # run (or resume) one run
    python -m killpoint.reference_agent.worker --queue [--follow] # take resume jobs from the jobs table

``main(argv) -> int`` is also what the harness's fork server calls in a forked child after setting the
environment: nothing is connected at import, signal handlers are installed inside ``main``, and ``main``
returns the exit code instead of exiting. ``main(argv, conn=CONN)`` uses ``CONN`` (autocommit, opened ahead
by the fork server's standby and named for this incarnation by ``take_session``, which also made the table
check: ``tables_checked=True``) instead of connecting, and closes it at the end as its own. The fork server
also calls ``warm(agents)`` once, before it forks any worker.

Environment (contracts.md section 2): ``DATABASE_URL``; ``MAILER_URL``, ``LEDGER_URL``, ``WEBHOOK_URL``;
``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``; ``KILLPOINT_STEPS`` (step module, default
``killpoint.reference_agent.invoice_agent``); ``KILLPOINT_PARAMS`` (JSON for ``initial_state`` of a new run);
``KILLPOINT_WORKER_ID`` (lease owner, default ``<hostname>:<pid>``); ``KILLPOINT_LEASE_SECONDS`` (30);
``KILLPOINT_DRAIN_SECONDS`` (90); ``KILLPOINT_STEP_DELAY`` (0); ``KILLPOINT_SLOW_STEPS`` (the steps the delay applies to, comma-separated; all); ``KILLPOINT_WINDOW_BUDGET`` (16000 JSON
characters); ``KILLPOINT_MODEL`` (model name); ``KILLPOINT_POLL_SECONDS`` (queue poll interval with
``--follow``, 0.2); ``KILLPOINT_SOCKET`` / ``KILLPOINT_INCARNATION`` (kill points, see ``killpoints``).

SIGTERM drains: no new work is taken, the in-flight step finishes and is checkpointed, the run is left
``paused``, the worker logs that it yields and exits 0. If the drain deadline passes first, the worker
exits 6 at once, without checkpointing the step in flight.

Exit codes: :data:`EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any

import psycopg

from . import clock, context, killpoints
from .checkpoint import FAILED, FINISHED
from .context import Resources
from .lease import LeaseBusy, LeaseLost
from .model_calls import may_call_model
from .queue import claim
from .runtime import Drain, RunOptions, run_durable
from .schema import DDL, ensure_schema
from .step_module import DEFAULT_STEPS, BadStepModule, StepModule, load_step_module
from .store import CheckpointStore, Fenced
from .versioning import IncompatibleCheckpoint, NewerCheckpoint

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_FENCED = 4
EXIT_LEASE_BUSY = 5
EXIT_DRAIN_DEADLINE = 6
EXIT_HARNESS_GONE = killpoints.HARNESS_GONE_EXIT

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "the run reached done, or drained after SIGTERM (status paused); queue mode: queue empty or drained",
    EXIT_ERROR: "unexpected error (traceback on stderr), or the run failed for good (status failed)",
    EXIT_USAGE: "usage or configuration error",
    EXIT_REFUSED: "checkpoint refused: newer version (NewerCheckpoint) or unreadable (IncompatibleCheckpoint)",
    EXIT_FENCED: "fenced: a checkpoint write was refused by the monotonic guard; stopped without further effects",
    EXIT_LEASE_BUSY: "lease held by another live owner (or taken over while working); left the run alone",
    EXIT_DRAIN_DEADLINE: "the drain deadline passed before the in-flight step was checkpointed",
    EXIT_HARNESS_GONE: "harness gone (kill-point socket EOF)",
}

log = logging.getLogger("reference_agent")


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class WorkerConfig:
    """The worker's settings, read from the environment."""

    database_url: str
    steps: str
    params: dict[str, Any]
    owner: str
    lease_seconds: float
    drain_seconds: float
    step_delay: float
    slow_steps: tuple[str, ...]
    window_budget: int
    poll_seconds: float

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerConfig:
        def number(name: str, default: float) -> float:
            raw = env.get(name, "")
            try:
                value = float(raw) if raw else default
            except ValueError:
                raise UsageError(f"{name}={raw!r} is not a number") from None
            if value < 0:
                raise UsageError(f"{name} must not be negative")
            return value

        dsn = env.get("DATABASE_URL", "")
        if not dsn:
            raise UsageError("DATABASE_URL is not set")
        try:
            params = json.loads(env.get("KILLPOINT_PARAMS") or "{}")
        except ValueError as exc:
            raise UsageError(f"KILLPOINT_PARAMS is not JSON: {exc}") from None
        if not isinstance(params, dict):
            raise UsageError("KILLPOINT_PARAMS must be a JSON object")
        return cls(
            database_url=dsn, steps=env.get("KILLPOINT_STEPS") or DEFAULT_STEPS, params=params,
            owner=env.get("KILLPOINT_WORKER_ID") or f"{socket.gethostname()}:{os.getpid()}",
            lease_seconds=number("KILLPOINT_LEASE_SECONDS", 30.0),
            drain_seconds=number("KILLPOINT_DRAIN_SECONDS", 90.0),
            step_delay=number("KILLPOINT_STEP_DELAY", 0.0),
            slow_steps=tuple(s for s in env.get("KILLPOINT_SLOW_STEPS", "").split(",") if s),
            window_budget=int(number("KILLPOINT_WINDOW_BUDGET", 16_000)),
            poll_seconds=number("KILLPOINT_POLL_SECONDS", 0.2))

    def run_options(self) -> RunOptions:
        return RunOptions(owner=self.owner, lease_seconds=self.lease_seconds, step_delay=self.step_delay,
                          slow_steps=self.slow_steps, window_budget=self.window_budget)


class _Shutdown:
    """The SIGTERM handler: set the drain flag and arm the drain deadline. Nothing else (it may interrupt
    anything, including a blocked kill-point read that must resume)."""

    def __init__(self, drain: Drain, deadline_seconds: float) -> None:
        self.drain = drain
        self.deadline_seconds = deadline_seconds
        self.timer: _DrainDeadline | None = None
        self.previous: Any = None

    def install(self) -> None:
        self.previous = signal.signal(signal.SIGTERM, self.handle)

    def uninstall(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.drain.requested:
            return
        self.drain.request()
        self.timer = _DrainDeadline(self.deadline_seconds, self.drain)
        self.timer.start()
        killpoints.note("drain.signal", run_id=self.drain.run_id, signal="SIGTERM",
                        deadline_seconds=self.deadline_seconds)


class _DrainDeadline(threading.Thread):
    """Exit 6 once `seconds` pass after the SIGTERM, unless cancelled. First it notes ``drain.deadline`` with
    ``waited``: the seconds this process's threads spent runnable but waiting for a CPU meanwhile (their
    kernel ``run_delay``; None where unreadable), so that a deadline a busy machine made the worker miss is
    told from a slow drain (the harness says UNKNOWN, not FAIL, when it is a large share of the deadline)."""

    def __init__(self, seconds: float, drain: Drain) -> None:
        super().__init__(name="killpoint-drain-deadline", daemon=True)
        self.seconds = seconds
        self.drain = drain
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()

    def run(self) -> None:
        before = _run_delays()
        if self.cancelled.wait(self.seconds):
            return
        after = _run_delays()
        waited = (None if before is None or after is None
                  else round(sum(ns - before.get(tid, 0) for tid, ns in after.items()) / 1e9, 3))
        killpoints.note("drain.deadline", run_id=self.drain.run_id, deadline_seconds=self.seconds, waited=waited)
        sys.stderr.write(f"worker: drain deadline of {self.seconds}s passed with a step in flight "
                         f"({waited if waited is not None else '?'}s of it waiting for a CPU); "
                         f"exiting {EXIT_DRAIN_DEADLINE}\n")
        sys.stderr.flush()
        os._exit(EXIT_DRAIN_DEADLINE)


def _run_delays() -> dict[int, int] | None:
    """Nanoseconds each live thread of this process has been runnable but waiting for a CPU (the second
    field of /proc/self/task/TID/schedstat), by thread id; None where the kernel keeps no schedstats."""
    out: dict[int, int] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out or None


@functools.cache
def parser() -> argparse.ArgumentParser:
    """The command line's parser, built once per process (a fork server builds it before it forks: ~1 ms
    that no incarnation pays)."""
    p = argparse.ArgumentParser(prog="python -m killpoint.reference_agent.worker",
                                description="Run or resume a durable agent run.")
    p.add_argument("run_id", nargs="?", help="the run to run or resume")
    p.add_argument("--queue", action="store_true", help="take resume jobs from the jobs table")
    p.add_argument("--follow", action="store_true", help="with --queue: wait for jobs until SIGTERM")
    return p


def _parse(argv: list[str]) -> argparse.Namespace:
    parser_ = parser()
    args = parser_.parse_args(argv)
    if bool(args.run_id) == args.queue:
        parser_.error("give either RUN_ID or --queue")
    if args.follow and not args.queue:
        parser_.error("--follow needs --queue")
    return args


_STOPS: dict[type[Exception], tuple[str, int]] = {
    # why the worker stopped without finishing: the note it sends, the exit code
    LeaseBusy: ("lease.busy", EXIT_LEASE_BUSY),
    LeaseLost: ("lease.lost", EXIT_LEASE_BUSY),
    NewerCheckpoint: ("refused.newer", EXIT_REFUSED),
    IncompatibleCheckpoint: ("refused.incompatible", EXIT_REFUSED),
    Fenced: ("fenced", EXIT_FENCED),
}


def run_one(store: CheckpointStore, run_id: str, module: StepModule, resources: Resources,
            config: WorkerConfig, drain: Drain) -> int:
    """Run ``run_id`` and map its outcome to an exit code (see :data:`EXIT_CODES`)."""
    drain.run_id = run_id
    try:
        cp = run_durable(store, run_id, module, resources, config.run_options(), drain, config.params)
    except tuple(_STOPS) as exc:
        note, code = _STOPS[type(exc)]
        log.error("%s: %s", note.upper(), exc)
        killpoints.note(note, **{**vars(exc), "run_id": run_id, "message": str(exc)})
        return code
    if cp.status == FINISHED:
        log.info("run %s done: seq=%s cost_usd=%s", run_id, cp.seq, cp.cost_usd)
        killpoints.note("run.done", run_id=run_id, seq=cp.seq)
        return EXIT_OK
    return EXIT_ERROR if cp.status == FAILED else EXIT_OK


def run_queue(store: CheckpointStore, module: StepModule, resources: Resources, config: WorkerConfig,
              drain: Drain, follow: bool) -> int:
    """Take resume jobs until the queue is empty (or, with ``follow``, until drained)."""
    while not drain.requested:
        job = claim(store.conn)
        if job is None:
            if not follow:
                return EXIT_OK
            drain.pause(config.poll_seconds)  # a SIGTERM ends the wait, not only the next poll
            continue
        if store.load(job.run_id) is None:
            log.warning("job %s: run %s has no checkpoint; dropped", job.id, job.run_id)
            continue
        code = run_one(store, job.run_id, module, resources, config, drain)
        log.info("job %s: run %s ended with exit code %s", job.id, job.run_id, code)
    return EXIT_OK


TABLES = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", DDL))
"""The runtime's tables (`schema.DDL`)."""
_PRESENT = """
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p')
"""


def tables_present(conn: psycopg.Connection) -> bool:
    """Whether every table of the runtime is in `current_schema()` (one catalogue read; a session that made
    it once answers it again from its warm caches)."""
    return conn.execute(_PRESENT, (list(TABLES),)).fetchone()[0] == len(TABLES)


def take_session(conn: psycopg.Connection, settings: Mapping[str, str]) -> bool:
    """Set each of `settings` for the session (`set_config(name, value, false)`: a session opened ahead,
    renamed for the incarnation that takes it) and return whether every table of the runtime is there
    (`tables_present`), in one round trip. The statement is prepared on the server (one per number of
    settings): a standby that runs it ahead with its own names (the same settings, the same text) leaves the
    incarnation's run of it without a parse or a plan."""
    sets = "".join(", set_config(%s, %s, false)" for _ in settings)
    row = conn.execute(f"SELECT ({_PRESENT}){sets}",
                       [list(TABLES), *[v for pair in settings.items() for v in pair]], prepare=True).fetchone()
    return row is not None and row[0] == len(TABLES)


def _ensure_tables(conn: psycopg.Connection) -> None:
    """`ensure_schema`, skipped when every table is already where it would create them: one read instead
    of a transaction, a lock and five statements, on every incarnation's start."""
    if not tables_present(conn):
        ensure_schema(conn)


STACK_SIGNAL = signal.SIGUSR1
"""The signal on which the worker dumps every thread's stack to stderr (``faulthandler``)."""


NOISY = ("httpx", "httpx2", "anthropic")
"""Libraries whose INFO lines (one per request) would drown the run's own log."""


def quiet_libraries() -> None:
    """Log only warnings of :data:`NOISY`. A logger already at WARNING is left alone: `setLevel` clears the
    cache of every logger there is (hundreds, with the SDK imported), once per call."""
    for name in NOISY:
        logger = logging.getLogger(name)
        if logger.level != logging.WARNING:
            logger.setLevel(logging.WARNING)


def warm(agents: list[ModuleType] | None = None) -> None:
    """Do once, in a process that forks workers, what each worker would otherwise do on its own:
    ``context.warm`` (the SDK imported and its first call made, unless no step of the step modules
    `agents` may call the model: ``model_calls``; HTTP clients built ahead), the loggers' levels,
    argparse's patterns (compiled on a first parse, kept in ``re``'s cache) and psycopg's array dumper (its
    pattern is compiled on the first list dumped: the table check's). Connects nothing, reads no
    environment."""
    context.warm(not agents or may_call_model(agents))
    quiet_libraries()
    _parse(["warm"])
    from psycopg.adapt import PyFormat, Transformer  # noqa: PLC0415

    Transformer().get_dumper(list(TABLES), PyFormat.AUTO).dump(list(TABLES))


def ahead() -> None:
    """Do, in a process forked ahead of the incarnation it will become (the fork server's standby), what that
    incarnation would do first that does not depend on which one it is, from the environment it was forked
    with: ``context.build_ahead`` (the SDK's client, where the SDK is imported) and
    ``killpoints.connect_ahead`` (its connection to the harness's kill-point socket)."""
    context.build_ahead()
    killpoints.connect_ahead()


def main(argv: list[str] | None = None, conn: psycopg.Connection | None = None, tables_checked: bool = False) -> int:
    """Entry point; returns the exit code (see :data:`EXIT_CODES`). `conn`: a connection opened ahead for
    this incarnation (see the module docstring), used instead of a new one and closed at the end;
    `tables_checked`: its table check was made already (`take_session`) and found every table."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s worker[%(process)d] %(levelname)s %(message)s")
    quiet_libraries()
    try:
        args = _parse(sys.argv[1:] if argv is None else list(argv))
        config = WorkerConfig.from_env(os.environ)
        module = load_step_module(config.steps)
        clock.shift_from(os.environ)  # a clock fault's resume: after the agent's imports, so they see it too
    except SystemExit as exc:  # argparse has printed the usage
        if conn is not None:
            conn.close()
        return EXIT_USAGE if exc.code else EXIT_OK
    except (UsageError, BadStepModule) as exc:
        print(f"worker: {exc}", file=sys.stderr)
        if conn is not None:
            conn.close()
        return EXIT_USAGE
    drain = Drain()
    shutdown = _Shutdown(drain, config.drain_seconds)
    shutdown.install()
    # SIGUSR1 writes every thread's stack to stderr (the incarnation's log): how the harness sees where a
    # worker that hangs is blocked when py-spy is not installed (harness/env/stacks.py).
    faulthandler.register(STACK_SIGNAL, all_threads=True)
    killpoints.note("worker.start", run_id=args.run_id, queue=args.queue, owner=config.owner,
                    stack_signal=STACK_SIGNAL.name)
    try:
        with conn or psycopg.connect(config.database_url, autocommit=True) as conn:
            if not tables_checked:
                _ensure_tables(conn)
            resources = Resources(conn)
            if module.module is None or may_call_model([module.module]):
                resources.sdk  # noqa: B018 - built before the first step, not inside it (`model_calls`)
            try:
                store = CheckpointStore(conn)
                if args.queue:
                    return run_queue(store, module, resources, config, drain, args.follow)
                return run_one(store, args.run_id, module, resources, config, drain)
            finally:
                resources.close()
    except Exception:
        traceback.print_exc()
        return EXIT_ERROR
    finally:
        shutdown.uninstall()


if __name__ == "__main__":
    sys.exit(main())
