"""The CLI as a subprocess, in a sandbox of its own, and a census of the processes and temp dirs a harness
process leaves behind.

Tests get one through the ``sandbox`` fixture (tests/conftest.py), which closes it afterwards whatever the
test did; code that needs several at once (a module-scoped fixture running subprocesses in threads) uses
``with Sandbox(root) as box:``, which closes it the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from killpoint.env import zygote
from killpoint.env.postgres.reaper import memory_dir, reap_orphans
from killpoint.env.zygote import ZYGOTE_VAR
from tests.helpers import pythonpath

FORKED_CLI_VAR = "KILLPOINT_TEST_FORKED_CLI"
TAG_VAR = "KILLPOINT_TEST_TAG"
"""Set in a harness subprocess's environment; every process it starts inherits it, so they can be found
after the harness is gone (reparented processes no longer descend from it)."""


PG_ROOT_PREFIX = "killpoint-test-pg-"


def reap_stale_roots(bases: list[Path] | None = None) -> list[Path]:
    """Remove the cluster roots of sandboxes whose test process is dead (SIGKILLed, or a test run stopped
    hard: `Sandbox.close` never ran): the clusters in them whose harness is dead too (`reaper.reap_orphans`,
    which stops their servers), then the root if that emptied it; returns the roots removed. A root whose
    process lives (another pytest worker), or whose name carries no pid (another checkout's test run, of
    an older naming), is left, and so is a cluster whose harness lives."""
    removed = []
    for base in bases or list(dict.fromkeys(p for p in (memory_dir(), Path(tempfile.gettempdir())) if p)):
        for root in sorted(base.glob(f"{PG_ROOT_PREFIX}*")):
            pid = root.name[len(PG_ROOT_PREFIX):].partition("-")[0]
            if not pid.isdigit() or psutil.pid_exists(int(pid)):
                continue
            reap_orphans([root])
            with contextlib.suppress(OSError):
                root.rmdir()  # only if empty: what is left is alive
                removed.append(root)
    return removed


@dataclass
class Sandbox:
    """A private place for harness subprocesses: their cwd, TMPDIR, Postgres cluster root and a tag.

    `run()` / `start()` run `killpoint ARGS` as a real subprocess (as a user would: no stdin, output
    captured; a subprocess because exit codes, stderr lines and cleanup are only honest when the process
    really ends). `env()` is the environment they start with; `survivors()` lists live processes carrying
    the tag (or serving a cluster under the sandbox's root); `leftover_dirs()` lists temp dirs and clusters
    still on disk. A clean harness leaves both empty. `close()` removes whatever is left.

    The cluster root is outside `root` (pytest's folders are private to root, and as root the server runs
    as an unprivileged user who must reach its data directory).
    """

    root: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    owner: int = field(default_factory=os.getpid)

    def __post_init__(self) -> None:
        # Where a user's sessions would put their clusters: in memory where the machine allows
        # (`reaper.memory_dir`), else in the temp folder. Chosen once: the room in memory may change.
        self._pg_base = memory_dir() or Path(tempfile.gettempdir())
        for d in (self.cwd, self.tmp, self.pg_root):
            d.mkdir(parents=True, exist_ok=True)
        self.pg_root.chmod(0o755)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill what the sandbox's harness left running and remove its cluster root (the one cleanup)."""
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
        """`killpoint-test-pg-<the test process's pid>-<tag>`: a killed test process's is found by the next
        test run's (`reap_stale_roots`)."""
        return self._pg_base / f"{PG_ROOT_PREFIX}{self.owner}-{self.tag[:16]}"

    @property
    def out(self) -> Path:
        return self.root / "runs"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({TAG_VAR: self.tag, "TMPDIR": str(self.tmp), "KILLPOINT_PG_ROOT": str(self.pg_root),
                    "PYTHONPATH": pythonpath(), "COLUMNS": "200", "NO_COLOR": "1"})
        return env

    def argv(self, *args: str) -> list[str]:
        """`python -m killpoint.cli.main ARGS`: the checkout's CLI, installed or not."""
        return [sys.executable, "-m", "killpoint.cli.main", *args]

    def run(self, *args: str, timeout: float = 300, path_first: tuple[Path, ...] = (),
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """`killpoint ARGS` to its end, output captured: forked from the test process's zygote where one can
        stand in (it imported the harness's modules once: `forked_run`), else a fresh interpreter.
        `path_first`: folders put before the checkout on PYTHONPATH (a user's step module's package); `env`:
        variables set over the sandbox's own (`env()`)."""
        env = {**self.env(), **(env or {})}
        if path_first:
            env["PYTHONPATH"] = os.pathsep.join([*map(str, path_first), env["PYTHONPATH"]])
        done = forked_run(self.argv(*args), env, self.cwd, timeout)
        if done is not None:
            return done
        return subprocess.run(self.argv(*args), capture_output=True, text=True, cwd=self.cwd, env=env,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """`killpoint ARGS` in the background, output captured, with SIGINT at its default (a shell
        starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored)."""
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=self.cwd, env=self.env(), stdin=subprocess.DEVNULL, preexec_fn=default_sigint)

    def events(self) -> Iterator[dict]:
        """Every event journalled so far in the histories under `out` (a line still being written, or torn
        by a kill, is passed over)."""
        for history in self.out.glob("*/history.jsonl"):
            for line in history.read_text().splitlines():
                try:
                    yield json.loads(line)
                except ValueError:
                    continue

    def faulted_run_began(self) -> bool:
        """True once a worker of a faulted (non-baseline) run has started: its `inc.start` is journalled."""
        return any(e.get("type") == "inc.start" and not str(e.get("run_id", "")).startswith("baseline")
                   for e in self.events())

    def until_faulted_run(self, proc: subprocess.Popen[str], timeout: float = 180) -> None:
        """Wait until `proc`, a harness this sandbox started, has begun a faulted run; fail with its output
        if it ended first."""
        from tests.helpers.agents import wait_for

        wait_for(lambda: self.faulted_run_began() or proc.poll() is not None, timeout=timeout,
                 what="a faulted run to begin")
        assert proc.poll() is None, proc.communicate()

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


def forked_run(argv: list[str], env: dict[str, str], cwd: Path,
               timeout: float) -> subprocess.CompletedProcess[str] | None:
    """`subprocess.run(argv, capture_output=True, text=True, stdin=DEVNULL)` of a `python -m ...` command,
    forked by the zygote `env` names (harness/env/zygote.py) instead of started: None where none can stand
    in. The CLI then starts without importing the harness (~1 CPU-second a session, a few hundred sessions a
    suite run); what differs from a fresh interpreter is listed in the zygote's module, and the tests of how
    a session's processes start and end run without the zygotes (tests/hostile/conftest.py).
    `KILLPOINT_TEST_FORKED_CLI=0` starts every CLI fresh (bench/suite.py's `fresh-cli` mode)."""
    if os.environ.get(FORKED_CLI_VAR) == "0":
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = zygote.popen(argv[1:], env, {1: out_w, 2: err_w}, cwd=str(cwd))
    finally:
        os.close(out_w)
        os.close(err_w)
    if proc is None:
        os.close(out_r)
        os.close(err_r)
        return None
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            ready = sel.select(max(0.0, left)) if left > 0 else []
            if not ready:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                for key in list(sel.get_map().values()):  # the pipes not at their end yet
                    os.close(key.fd)
                raise subprocess.TimeoutExpired(argv, timeout)
            for key, _ in ready:
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    code = proc.wait(max(1.0, deadline - time.monotonic()))
    out, err = (b"".join(chunks[fd]).decode(errors="replace") for fd in (out_r, err_r))
    return subprocess.CompletedProcess(argv, code, out, err)


def default_sigint() -> None:
    """For `preexec_fn`: SIGINT at its default in the child (a shell starts background jobs with SIGINT
    ignored, and Python keeps an ignored SIGINT ignored: a test's Ctrl-C would then reach nothing)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def without_zygote() -> Iterator[None]:
    """Within: harnesses started from this process start their fork servers themselves (the test session's
    zygotes, tests/conftest.py, are not named in the environment), for tests of how those servers start
    and end: children of the harness that import the agent and die with it by their parent-death signal."""
    saved = os.environ.pop(ZYGOTE_VAR, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[ZYGOTE_VAR] = saved
