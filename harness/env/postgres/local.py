"""``local``: an ephemeral cluster from Postgres binaries on this machine (also used by ``embedded``).

Start: copy the cached template data dir (see ``template``) into a fresh owned folder (see ``reaper``),
pick a free port, start the ``postgres`` binary directly (no ``pg_ctl``) listening on 127.0.0.1 only with
its unix socket in the folder, and poll ``postmaster.pid`` until it says ``ready``. If the port was taken
between choosing and binding, try another (``PORT_ATTEMPTS`` in all). As root the server runs as the
``postgres`` user. ``crash()`` stops it without a checkpoint; ``restart()`` starts it on the same data and
port (crash recovery replays the WAL, so committed rows survive). ``close()`` stops it and removes the folder.
``died()`` says whether the postmaster died of something else than these (killed from outside: ``vitals``).

The unix socket goes in the cluster folder, whose path the reaper keeps short enough for one
(``reaper.clusters_root``); should it still be too long, the server listens on TCP only (everything killpoint
does connects by TCP), never failing to start for a socket path.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from killpoint.env.postgres.binaries import PgBinaries, RunAs, run_as
from killpoint.env.postgres.capacity import DEFAULT_SERVER
from killpoint.env.postgres.handle import PostgresHandle
from killpoint.env.postgres.process import kill_tree, popen_dying_with_us, remove_shm, stop_postmaster
from killpoint.env.postgres.reaper import destroy, new_cluster_dir
from killpoint.env.postgres.template import SUPERUSER, copy_tree, ensure_template, initdb
from killpoint.env.postgres.wait import Wait, log_tail
from killpoint.errors import EnvironmentProblem

PORT_ATTEMPTS = 5
START_TIMEOUT = 60.0
MAIN_DB = "killpoint"
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    # A process crash keeps the OS page cache, so fsync is not needed for committed rows to survive
    # a db-crash; synchronous_commit stays on so COMMIT means "in the WAL".
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    # Dynamic shared memory in files of the data directory, removed with the cluster's folder. The default
    # (posix) puts a 1 MB segment in /dev/shm per server start that a SIGKILLed postmaster (a db-crash, a
    # killed harness) never removes: 266 of them (137 MB of memory) had piled up here in two days.
    "dynamic_shared_memory_type": "mmap",
    "logging_collector": "off",
    "log_min_messages": "warning",
}
PORT_IN_USE = ("Address already in use", "could not create any TCP/IP sockets")
SOCKET_PATH_MAX = 107
"""The longest unix socket path Linux takes (sun_path is 108 bytes with its NUL), as Postgres checks it."""


class PortTaken(Exception):
    """The chosen port was bound by someone else before the server could bind it."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the server may still lose a race for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer(PostgresHandle):
    """A server this process started from ``bins``; see the module doc. Build with ``LocalServer.start``."""

    owned = True

    def __init__(self, bins: PgBinaries, kind: str = "local", user: RunAs | None = None) -> None:
        self.bins = bins
        self.kind = kind
        self.user = user or run_as()
        self.dir: Path | None = None
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.timings: dict[str, float] = {}
        self._dsn: str | None = None
        self._down_on_purpose = True  # until the first start: only a started server can die

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def start(
        cls, bins: PgBinaries, kind: str = "local", port_chooser: Callable[[], int] = free_port,
        connections: int = DEFAULT_SERVER,
    ) -> LocalServer:
        """Start a fresh cluster with room for `connections` (`max_connections`); on any failure (or Ctrl-C)
        nothing is left behind."""
        server = cls(bins, kind=kind)
        server.connections = connections
        try:
            server._boot(port_chooser)
        except BaseException:
            server.close()
            raise
        return server

    def _boot(self, port_chooser: Callable[[], int]) -> None:
        t0 = time.monotonic()
        self.dir = new_cluster_dir(self.kind)
        self.user.chown(self.dir)  # the server creates its socket and lock file here
        template = ensure_template(self.bins, self.user)
        t1 = time.monotonic()
        if template is not None:
            copy_tree(template, self.data)
        else:
            initdb(self.bins, self.user, self.data, self.dir / "initdb.log")
        t2 = time.monotonic()
        tried: list[int] = []
        for _ in range(PORT_ATTEMPTS):
            port = port_chooser()
            tried.append(port)
            try:
                self._spawn(port)
                break
            except PortTaken:
                continue
        else:
            raise EnvironmentProblem(
                "port-unavailable",
                f"every port tried for the {self.kind} Postgres was taken before it could bind "
                f"({', '.join(map(str, tried))})",
                "free some local ports or stop the program that grabs them, then run again",
            )
        t3 = time.monotonic()
        self._dsn = self.create_database(MAIN_DB)
        self.timings = {
            "template": t1 - t0,
            "copy": t2 - t1,
            "start": t3 - t2,
            "total": time.monotonic() - t0,
        }

    # -- paths and DSNs -----------------------------------------------------------------------------
    @property
    def data(self) -> Path:
        assert self.dir is not None
        return self.dir / "data"

    @property
    def log(self) -> Path:
        assert self.dir is not None
        return self.dir / "server.log"

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        if self._dsn is None:
            raise EnvironmentProblem("not-started", f"the {self.kind} server is not started", "use provide()")
        return self._dsn

    # -- process control ----------------------------------------------------------------------------
    def _spawn(self, port: int) -> None:
        """Start ``postgres`` on ``port`` and wait for ``ready``; ``PortTaken`` if the bind failed."""
        assert self.dir is not None
        sockets = str(self.dir) if len(os.fsencode(self.dir / f".s.PGSQL.{port}")) <= SOCKET_PATH_MAX else ""
        cmd = [self.bins.exe("postgres"), "-D", str(self.data), "-p", str(port), "-k", sockets]
        for key, value in {**SETTINGS, "max_connections": str(self.connections)}.items():
            cmd += ["-c", f"{key}={value}"]
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            start = subprocess.Popen if os.environ.get("KILLPOINT_PG_NO_PDEATHSIG") else popen_dying_with_us
            self.proc = start(  # type: ignore[operator]
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=str(self.dir),
                start_new_session=True,
                **self.user.popen_kwargs(),
            )
        self.port = port
        proc = self.proc

        def ready() -> bool | None:
            if proc.poll() is not None:
                with open(self.log, "rb") as fh:
                    fh.seek(offset)
                    text = fh.read().decode(errors="replace")
                if any(marker in text for marker in PORT_IN_USE):
                    raise PortTaken(port)
                raise EnvironmentProblem(
                    "server-start-failed",
                    f"postgres ({self.bins.bindir}) exited with code {proc.returncode} while starting: "
                    f"{log_tail(self.log)}",
                    f"read {self.log}; run `killpoint doctor` to check the installation",
                )
            try:
                lines = (self.data / "postmaster.pid").read_text().splitlines()
            except OSError:
                return None
            if len(lines) >= 8 and lines[0].strip() == str(proc.pid) and lines[7].strip() == "ready":
                self._down_on_purpose = False
                return True
            return None

        try:
            Wait(
                f"the {self.kind} Postgres on port {port} to be ready",
                START_TIMEOUT,
                self.log,
                "the machine may be overloaded; read the log, or raise the timeout",
                "server-not-ready",
            ).until(ready)
        except EnvironmentProblem:
            self._stop_process()
            raise

    def _postmaster(self) -> psutil.Process | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            return psutil.Process(self.proc.pid)
        except psutil.NoSuchProcess:
            return None

    def _stop_process(self) -> None:
        self._down_on_purpose = True
        pm = self._postmaster()
        if pm is not None:
            stop_postmaster(pm, self.data)
        if self.proc is not None:
            self.proc.wait()

    @property
    def running(self) -> bool:
        return self._postmaster() is not None

    def died(self) -> str | None:
        """What ended the postmaster, if it ended while it should be running (not ``crash``ed, stopped or
        closed by this object): e.g. "the local Postgres (postmaster pid 12) was killed by SIGKILL"; else None."""
        proc = self.proc
        if proc is None or self._down_on_purpose:
            return None
        code = proc.poll()
        if code is None or self._down_on_purpose:
            return None
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() \
            else f"exited with code {code}"
        return f"the {self.kind} Postgres (postmaster pid {proc.pid}) {how}: the database went away"

    def crash(self, hard: bool = False) -> None:
        """Stop at once with no checkpoint: SIGQUIT to the postmaster (immediate shutdown), or with
        ``hard=True`` SIGKILL to the postmaster and every backend together (and its shared memory freed,
        as if the power went). Either way ``restart()`` runs crash recovery."""
        pm = self._postmaster()
        if pm is None:
            raise EnvironmentProblem(
                "not-running", f"the {self.kind} server is not running", "restart() it first"
            )
        self._down_on_purpose = True
        if hard:
            kill_tree(pm, signal.SIGKILL)
            remove_shm(self.data)
        else:
            pm.send_signal(signal.SIGQUIT)
        assert self.proc is not None
        self.proc.wait(timeout=30)

    def restart(self) -> None:
        """Start again on the same data dir and port (stopping first if running); wait until ready."""
        assert self.port is not None
        if self.running:
            self._stop_process()
        try:
            self._spawn(self.port)
        except PortTaken:
            raise EnvironmentProblem(
                "port-taken-on-restart",
                f"port {self.port} of the crashed {self.kind} Postgres was taken by another program before restart",
                "stop whatever now listens on that port, then run again",
            ) from None

    def close(self) -> None:
        """Stop the server (immediate shutdown) and remove its folder. Idempotent."""
        try:
            self._stop_process()
        finally:
            if self.dir is not None:
                destroy(self.dir)
            self.proc = None
