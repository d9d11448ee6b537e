"""Helpers for the reference agent's tests: worker subprocesses, a kill-point server, polling.

Test modules import ``agent_fixture`` to get the ``agent`` fixture (an :class:`AgentEnv`).

Nothing here sleeps to synchronise: :func:`wait_for` polls a condition with a deadline, and
:class:`PointServer` holds a worker at a kill point until the test releases it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from killpoint.fake_services import Services
from tests.helpers import REPO


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy (returned) or ``timeout`` passes (fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class Hold:
    """A rule of :class:`PointServer`: hold the ``nth`` report of ``point`` at ``step``."""

    def __init__(self, point: str, step: str, nth: int) -> None:
        self.point, self.step, self.nth = point, step, nth
        self.seen = 0
        self.reached = threading.Event()
        self.released = threading.Event()
        self.message: dict[str, Any] = {}

    def wait(self, timeout: float = 20.0) -> dict[str, Any]:
        assert self.reached.wait(timeout), f"worker never reached {self.step}:{self.point}"
        return self.message

    def release(self) -> None:
        self.released.set()


class PointServer:
    """The harness side of the kill-point protocol, minimal: records every message, answers go, except
    at held points, which wait for :meth:`Hold.release`."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.messages: list[dict[str, Any]] = []
        self.holds: list[Hold] = []
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(16)
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, point: str, step: str, nth: int = 1) -> Hold:
        rule = Hold(point, step, nth)
        with self._lock:
            self.holds.append(rule)
        return rule

    def notes(self, name: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [m for m in self.messages if m["kind"] == "note" and name in (None, m["note"])]

    def points(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(m["step"], m["point"]) for m in self.messages if m["kind"] == "point"]

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        # Keep reading while a point is held: notes (e.g. drain.signal) arrive while the worker waits.
        def go(rule: Hold | None) -> None:
            if rule is not None:
                rule.released.wait()
            try:
                conn.sendall(b'{"go": true}\n')
            except OSError:
                pass

        try:
            for line in conn.makefile("rb"):
                msg = json.loads(line)
                with self._lock:
                    self.messages.append(msg)
                    rule = self._match(msg) if msg["kind"] == "point" else None
                if msg["kind"] != "point":
                    continue
                if rule is None:
                    go(None)
                    continue
                rule.message = msg
                rule.reached.set()
                threading.Thread(target=go, args=(rule,), daemon=True).start()
        except OSError:
            pass

    def _match(self, msg: dict[str, Any]) -> Hold | None:
        for rule in self.holds:
            if rule.point == msg["point"] and rule.step == msg["step"]:
                rule.seen += 1
                if rule.seen == rule.nth:
                    return rule
        return None

    def close(self) -> None:
        self._closed = True
        for rule in self.holds:
            rule.release()
        self._listener.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()


class Worker:
    """A worker subprocess with its stderr kept in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._log_file = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "killpoint.reference_agent.worker", *args], env=env,
                                     cwd=REPO, stdout=self._log_file, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._log_file.flush()

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._log_file.close()

    @property
    def output(self) -> str:
        self._log_file.flush()
        return self.log.read_text(errors="replace")


class AgentEnv:
    """One test's world: a fresh database, the fake services, workers, and (on demand) a kill-point server."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        self.dsn = dsn
        self.tmp = tmp
        self.services = Services.start()
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.workers: list[Worker] = []
        self._points: PointServer | None = None
        from killpoint.reference_agent.schema import ensure_schema
        ensure_schema(self.conn)

    @property
    def points(self) -> PointServer:
        if self._points is None:
            # unix socket paths are limited to ~107 bytes: keep it short
            self._points = PointServer(Path(f"/tmp/kp-{os.getpid()}-{id(self)}.sock"))
        return self._points

    def env(self, run_id: str, **extra: Any) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KILLPOINT_", "ANTHROPIC_"))}
        base.update(self.services.env(run_id), DATABASE_URL=self.dsn, PYTHONPATH=str(REPO))
        if self._points is not None:
            base.update(KILLPOINT_SOCKET=self._points.path, KILLPOINT_INCARNATION=f"i{len(self.workers) + 1}")
        base.update({k: str(v) for k, v in extra.items()})
        return base

    def start(self, run_id: str, *args: str, **extra: Any) -> Worker:
        """Start ``python -m killpoint.reference_agent.worker`` (``args`` default: ``RUN_ID``) with env ``extra``."""
        log = self.tmp / f"worker-{len(self.workers) + 1}.log"
        worker = Worker(list(args) or [run_id], self.env(run_id, **extra), log)
        self.workers.append(worker)
        return worker

    def run(self, run_id: str, *args: str, timeout: float = 60.0, **extra: Any) -> Worker:
        """Start a worker and wait for it to exit."""
        worker = self.start(run_id, *args, **extra)
        worker.wait(timeout)
        return worker

    def row(self, run_id: str) -> dict[str, Any] | None:
        """The checkpoint row as stored: seq, status, data (parsed), text (data as text), updated_at."""
        row = self.conn.execute(
            "SELECT seq, status, data, data::text, updated_at FROM checkpoints WHERE run_id = %s",
            (run_id,)).fetchone()
        return None if row is None else dict(zip(("seq", "status", "data", "text", "updated_at"), row,
                                                  strict=True))

    def expire_lease(self, run_id: str) -> None:
        """Let the lease of a dead worker run out (as the harness does, instead of waiting)."""
        self.conn.execute("UPDATE leases SET expires_at = now() - interval '1 second' WHERE run_id = %s",
                          (run_id,))

    def kill(self, worker: Worker, run_id: str) -> None:
        """SIGKILL the worker (no graceful shutdown at all), reap it, and let its lease run out."""
        kill(worker)
        self.expire_lease(run_id)

    def crash_at(self, run_id: str, step: str, point: str, **extra: Any) -> dict[str, Any]:
        """Start a worker, hold it at ``step:point``, SIGKILL it there and let its lease run out; return the
        point's report."""
        hold = self.points.hold(point, step)
        worker = self.start(run_id, **extra)
        report = hold.wait()
        self.kill(worker, run_id)
        return report

    def term_at(self, run_id: str, step: str, point: str, **extra: Any) -> Worker:
        """Start a worker, hold it at ``step:point``, SIGTERM it there, and let it go on once its handler has
        run (the worker is then blocked reading the go); return the worker."""
        hold = self.points.hold(point, step)
        worker = self.start(run_id, **extra)
        hold.wait()
        worker.signal(signal.SIGTERM)
        wait_for(lambda: self.points.notes("drain.signal"), what="the drain.signal note")
        hold.release()
        return worker

    def effects(self, run_id: str, service: str) -> list[dict[str, Any]]:
        return [e for e in self.services.effects(run_id) if e["service"] == service]

    def model_requests(self, run_id: str) -> list[dict[str, Any]]:
        return self.services.model_requests(run_id)

    def invoices(self, run_id: str) -> list[tuple[str, int]]:
        return self.conn.execute("SELECT invoice_id, amount_cents FROM invoices WHERE run_id = %s",
                                 (run_id,)).fetchall()

    def close(self) -> None:
        for worker in self.workers:
            worker.kill()
        if self._points is not None:
            self._points.close()
            Path(self._points.path).unlink(missing_ok=True)
        self.services.stop()
        self.conn.close()


def kill(worker: Worker) -> None:
    """SIGKILL, no graceful shutdown at all, and reap."""
    worker.signal(signal.SIGKILL)
    worker.wait(10)


@pytest.fixture(name="agent")
def agent_fixture(pg_dsn: str, tmp_path: Path) -> Iterator[AgentEnv]:
    """An :class:`AgentEnv` on the test's fresh database; every worker it started is killed afterwards."""
    env = AgentEnv(pg_dsn, tmp_path)
    yield env
    env.close()
