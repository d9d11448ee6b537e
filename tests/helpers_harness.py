"""Helpers for the harness core's tests: a Session on the test Postgres, the CLI as a subprocess, and a
census of the processes and temp dirs a harness process leaves behind.

Nothing here sleeps to synchronise: waits poll a condition with a deadline (``agent_helpers.wait_for``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from killpoint.env.environment import Environment
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.env.postgres import PostgresHandle
from killpoint.env.stepmodule import DEFAULT_STEPS, load
from killpoint.run.trial import Session
from killpoint.reference_agent.schema import ensure_schema

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
BROKEN_AGENT = "bad_steps.no_email_key"
"""The invoice agent with no idempotency key on its email: `email:effect.applied:kill` sends it twice."""

TAG_VAR = "KILLPOINT_TEST_TAG"
"""Set in a harness subprocess's environment; every process it starts inherits it, so they can be found
after the harness is gone (reparented processes no longer descend from it)."""


def pythonpath(*extra: Path) -> str:
    """PYTHONPATH with the tests folder (for `bad_steps`) and the repository first."""
    parts = [str(p) for p in (*extra, TESTS, REPO)]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


@contextlib.contextmanager
def harness_session(pg_server: PostgresHandle, run_dir: Path, db: str, *, spawn: str = "fork",
                    steps: str = DEFAULT_STEPS, options: RunOptions | None = None) -> Iterator[Session]:
    """A Session on a fresh database of the test server, with the agent `steps` preloaded.

    The environment (fake services, barrier, launcher) is the one the CLI builds; only the Postgres is
    the test session's (`--postgres dsn`), which saves a server start per module.
    """
    dsn = pg_server.create_database(db)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", pythonpath())  # fork server and workers import `bad_steps` too
        agent = load(steps)
        run_dir.mkdir(parents=True, exist_ok=True)
        history = History(run_dir / "history.jsonl")
        try:
            with Environment(postgres="dsn", dsn=dsn, allow_any_dsn=True, spawn=spawn, preload=[agent.module],
                             run_dir=run_dir, schema=ensure_schema) as env:
                yield Session(env, history, agent, options or RunOptions(grace=5.0))
        finally:
            history.close()
            with contextlib.suppress(Exception):
                pg_server.drop_database(db)


def run_events(events: list[dict], run_id: str) -> list[dict]:
    """The control events of one run (service-side evidence left out), in journal order."""
    return [e for e in events if e.get("run_id") == run_id and e["type"] not in ("attempt", "effect", "model.request")]


# ---- the CLI as a subprocess ------------------------------------------------------------------------

@dataclass
class Sandbox:
    """A private place for harness subprocesses: their cwd, TMPDIR, Postgres cluster root and a tag.

    `env()` is the environment to start the CLI with; `survivors()` lists live processes carrying the
    tag (or serving a cluster under the sandbox's root); `leftover_dirs()` lists temp dirs and clusters
    still on disk. A clean harness leaves both empty. `close()` removes whatever is left.

    The cluster root is outside `root` (pytest's folders are private to root, and as root the server runs
    as an unprivileged user who must reach its data directory).
    """

    root: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        for d in (self.cwd, self.tmp, self.pg_root):
            d.mkdir(parents=True, exist_ok=True)
        self.pg_root.chmod(0o755)
        OPEN_SANDBOXES.append(self)

    def close(self) -> None:
        """Kill what the sandbox's harness left running and remove its cluster root."""
        for line in self.survivors():
            with contextlib.suppress(psutil.Error):
                psutil.Process(int(line.split()[0])).kill()
        shutil.rmtree(self.pg_root, ignore_errors=True)

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def pg_root(self) -> Path:
        return Path(tempfile.gettempdir()) / f"killpoint-test-pg-{self.tag[:16]}"

    @property
    def out(self) -> Path:
        return self.root / "runs"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({TAG_VAR: self.tag, "TMPDIR": str(self.tmp), "KILLPOINT_PG_ROOT": str(self.pg_root),
                    "PYTHONPATH": pythonpath(), "COLUMNS": "200", "NO_COLOR": "1"})
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "killpoint.cli.main", *args]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`killpoint ARGS` to its end, output captured."""
        return subprocess.run(self.argv(*args), capture_output=True, text=True, cwd=self.cwd, env=self.env(),
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """`killpoint ARGS` in the background, output captured, with SIGINT at its default (a shell
        starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored)."""
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=self.cwd, env=self.env(), stdin=subprocess.DEVNULL, preexec_fn=_default_sigint)

    def survivors(self) -> list[str]:
        """Live processes the sandbox's harness started (directly or not), as 'pid name cmdline'."""
        out = []
        for proc in psutil.process_iter(["pid", "name", "cmdline"]):
            if proc.pid == os.getpid():
                continue
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                cmdline = " ".join(proc.info["cmdline"] or [])
                if str(self.pg_root) in cmdline or proc.environ().get(TAG_VAR) == self.tag:
                    out.append(f"{proc.pid} {proc.info['name']} {cmdline[:120]}")
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return out

    def leftover_dirs(self) -> list[str]:
        """Temp dirs and Postgres clusters still on disk."""
        return sorted(str(p) for d in (self.tmp, self.pg_root) for p in d.iterdir())


OPEN_SANDBOXES: list[Sandbox] = []
"""Every sandbox made in this test session; conftest closes them all at its end, so a test that forgot
(or failed before) `close()` does not leave its cluster root in the temp dir."""


def close_sandboxes() -> None:
    while OPEN_SANDBOXES:
        OPEN_SANDBOXES.pop().close()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
