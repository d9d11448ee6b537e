"""Both launchers work: incarnations forked from the preloaded fork server, and fresh interpreters
(`--spawn exec`). One trial each through the whole harness, and each launcher's process plumbing directly:
start and exit reported in order, SIGSTOP/SIGCONT followed, SIGKILL reported as signal 9, close() ends
every child."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.env.barrier import BarrierServer
from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import Incarnation, Launcher
from killpoint.env.postgres import PostgresHandle
from killpoint.env.stepmodule import DEFAULT_STEPS
from killpoint.faults.schedule import Schedule
from killpoint.run.history import trace
from killpoint.run.trial import Session, Trial
from tests.helpers.agents import wait_for
from tests.helpers.harness import harness_session

SCHEDULE = "charge:effect.applied:kill"


def trial_with_parents(session: Session) -> tuple[Trial, list[int]]:
    """Run SCHEDULE and note, for each incarnation, the pid of its parent while it ran."""
    session.baseline()
    launcher = session.env.launcher
    parents: list[int] = []
    spawn = launcher.spawn

    def spawn_and_look(*args: object, **kwargs: object) -> Incarnation:
        inc = spawn(*args, **kwargs)  # type: ignore[arg-type]
        parents.append(psutil.Process(inc.pid).ppid())
        return inc

    launcher.spawn = spawn_and_look  # type: ignore[method-assign]
    try:
        return session.trial(Schedule.parse(SCHEDULE)), parents
    finally:
        del launcher.spawn


@pytest.fixture(scope="module")
def fork_session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("fork"), "test_launcher_fork") as s:
        yield s


@pytest.fixture(scope="module")
def exec_session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("exec"), "test_launcher_exec", spawn="exec") as s:
        yield s


def test_fork_and_exec_launchers_run_the_same_trial(fork_session: Session, exec_session: Session) -> None:
    assert isinstance(fork_session.env.launcher, ForkLauncher)
    assert isinstance(exec_session.env.launcher, ExecLauncher)
    forked, fork_parents = trial_with_parents(fork_session)
    execd, exec_parents = trial_with_parents(exec_session)
    assert forked.outcome == execd.outcome == "pass", (forked.verdicts, execd.verdicts)
    assert fork_parents == fork_session.env.launcher.server_pids  # the resumed one from the other hash seed's server
    assert exec_parents == [os.getpid()] * 2
    assert trace(forked.evidence.events, {forked.run_id: "<run>"}) == trace(execd.evidence.events, {execd.run_id: "<run>"})


# ---- the launchers' process plumbing, without the rest of the harness ----------------------------------------

class Held:
    """A kill-point server that holds every worker at its first point until released."""

    def __init__(self, path: Path) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.server = BarrierServer(path, self._point, lambda msg: None)

    def _point(self, msg: dict) -> bool:
        self.reached.set()
        return self.release.wait(timeout=60)


BLACK_BOX = """
import json, os, socket, sys
if sys.argv[1] == "--bad-usage":
    sys.exit(2)
sock = socket.socket(socket.AF_UNIX)
sock.connect(os.environ["KILLPOINT_SOCKET"])
report = {"v": 1, "kind": "point", "point": "step.start", "run_id": sys.argv[1], "step": "plan", "seq": 0,
          "pid": os.getpid(), "incarnation": os.environ["KILLPOINT_INCARNATION"]}
sock.sendall((json.dumps(report) + "\\n").encode())
sock.makefile().readline()
"""
"""A worker in no particular language: it speaks the kill-point protocol by hand (a `--worker-cmd`)."""


@pytest.fixture(params=["fork", "exec"])
def launcher(request: pytest.FixtureRequest) -> Iterator[Launcher]:
    """A fork server running the reference worker, or an exec launcher running the black-box worker."""
    made: Launcher = (ForkLauncher([DEFAULT_STEPS]) if request.param == "fork"
                      else ExecLauncher([sys.executable, "-c", BLACK_BOX, "{run_id}"]))
    try:
        yield made
    finally:
        made.close()


def test_launcher_plumbing(launcher: Launcher, pg_dsn: str, tmp_path: Path) -> None:
    """Exit codes; start before exit; SIGSTOP/SIGCONT followed; SIGKILL is signal 9; close() ends children."""
    held = Held(tmp_path / "kp.sock")
    order: list[tuple[str, str]] = []
    launcher.on_start = lambda inc: order.append(("start", inc.inc))
    launcher.on_exit = lambda inc: order.append(("exit", inc.inc))
    env = {**os.environ, "DATABASE_URL": pg_dsn, "KILLPOINT_SOCKET": str(held.server.path),
           "KILLPOINT_INCARNATION": "r-1#1"}
    try:
        usage = launcher.spawn("r-0#1", "--bad-usage", "worker", ["--bad-usage"], env, str(tmp_path / "usage.log"))
        assert usage.ended.wait(timeout=30)
        assert (usage.exit_code, usage.signal) == (2, None)  # the worker's usage error, as an exit code
        assert order == [("start", "r-0#1"), ("exit", "r-0#1")]

        inc = launcher.spawn("r-1#1", "r-1", "worker", ["r-1"], env, str(tmp_path / "w.log"))
        assert inc.pid > 0 and inc.alive() and order[2:] == [("start", "r-1#1")]
        assert held.reached.wait(timeout=30), (tmp_path / "w.log").read_text()
        assert inc.send(signal.SIGSTOP)
        assert inc.stopped.wait(timeout=10)
        assert psutil.Process(inc.pid).status() == psutil.STATUS_STOPPED
        assert inc.send(signal.SIGCONT)
        assert inc.continued.wait(timeout=10) and not inc.stopped.is_set()
        assert inc.send(signal.SIGKILL)
        assert inc.ended.wait(timeout=10)
        assert (inc.exit_code, inc.signal, inc.alive()) == (None, signal.SIGKILL, False)
        assert order[2:] == [("start", "r-1#1"), ("exit", "r-1#1")]
        assert not inc.send(signal.SIGKILL)  # a process that ended is never signalled again

        held.reached.clear()
        running = launcher.spawn("r-2#1", "r-2", "worker", ["r-2"], env, str(tmp_path / "w2.log"))
        assert held.reached.wait(timeout=30)
        launcher.close()
        assert running.ended.wait(timeout=10) and running.signal == signal.SIGKILL
        wait_for(lambda: not psutil.pid_exists(running.pid) or
                 psutil.Process(running.pid).status() == psutil.STATUS_ZOMBIE, 10, "the worker to be gone")
    finally:
        held.release.set()
        held.server.close()


def test_fork_servers_closed_before_they_are_ready_leave_nothing() -> None:
    """The environment starts the fork servers first and waits for them last (`wait=False`, then
    `ready()`); a start that fails in between closes them while they are still importing the agent: they
    are killed, not waited for, and nothing is left."""
    launcher = ForkLauncher([DEFAULT_STEPS], wait=False)
    procs = [psutil.Process(server._proc.pid) for server in launcher._servers]
    assert len(procs) == 2 and launcher.server_pids == []  # started, not yet ready
    launcher.close()
    for proc in procs:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, proc
    assert [server._proc.returncode for server in launcher._servers] == [-signal.SIGKILL] * 2


def test_fork_servers_started_without_waiting_are_ready_when_asked() -> None:
    launcher = ForkLauncher([DEFAULT_STEPS], wait=False)
    try:
        launcher.ready()
        assert len(launcher.server_pids) == 2 and all(psutil.pid_exists(pid) for pid in launcher.server_pids)
    finally:
        launcher.close()
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in launcher.server_pids)


def _huge_pages_collapse() -> str | None:
    """Why this kernel cannot back memory with huge pages on request, or None if it can."""
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "no transparent huge pages here"
    if "[never]" in mode:
        return "transparent huge pages are off (never)"
    if tuple(int(x) for x in os.uname().release.split(".")[:2]) < (6, 1):
        return "MADV_COLLAPSE needs Linux 6.1"
    return None


def _anon_huge_kb(pid: int) -> int:
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return int(rollup.split("AnonHugePages:")[1].split()[0])


def test_a_fork_servers_preloaded_heap_is_backed_by_huge_pages() -> None:
    """`procutil.huge_heap`, called by the fork server once it has preloaded the agent: a fork then copies
    one page-table entry per 2 MB of the SDK's heap instead of 512 (bench/cpu_split.py: ~20 ms of CPU less
    per random schedule). Where the kernel cannot, nothing changes and the server runs as before."""
    reason = _huge_pages_collapse()
    if reason is not None:
        pytest.skip(reason)
    launcher = ForkLauncher([DEFAULT_STEPS])
    try:
        assert all(_anon_huge_kb(pid) >= 16 * 1024 for pid in launcher.server_pids), \
            [_anon_huge_kb(pid) for pid in launcher.server_pids]
    finally:
        launcher.close()


def test_huge_heap_backs_only_private_anonymous_memory(tmp_path: Path) -> None:
    """It asks only for the heap and anonymous private mappings (no file, no stack, nothing read-only), and
    says 0 when there is none of them at 2 MB boundaries."""
    from killpoint.env.procutil import huge_heap  # noqa: PLC0415

    maps = tmp_path / "maps"
    maps.write_text("00400000-00600000 r-xp 00000000 08:01 1 /usr/bin/python3\n"
                    "7f0000000000-7f0000400000 rw-p 00000000 08:01 2 /tmp/data.bin\n"
                    "7ffc00000000-7ffc00400000 rw-p 00000000 00:00 0 [stack]\n"
                    "7f1000001000-7f1000002000 rw-p 00000000 00:00 0\n")
    assert huge_heap(str(maps)) == 0
    if _huge_pages_collapse() is None:
        import mmap  # noqa: PLC0415

        block = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        block.write(b"x" * (8 << 20))
        assert huge_heap() >= 4 << 20 and _anon_huge_kb(os.getpid()) >= 4 * 1024
        block.close()


def test_a_spawn_a_stopped_fork_server_never_answers_is_one_error_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork server stopped from outside (SIGSTOP) reads no command: the spawn waits `SPAWN_ANSWER_SECONDS`,
    then raises `forkserver-stuck` naming the server and how to see it is stopped (an environment error: the
    session ends in that one line), where it raised a bare `queue.Empty`. The servers are gone after close."""
    from killpoint.env import fork_launcher  # noqa: PLC0415
    from killpoint.env.vitals import EnvironmentGone  # noqa: PLC0415

    monkeypatch.setattr(fork_launcher, "SPAWN_ANSWER_SECONDS", 1.0)
    launcher = ForkLauncher(["json"], standby=False)
    servers = [psutil.Process(pid) for pid in launcher.server_pids]
    try:
        for server in servers:
            server.suspend()
        with pytest.raises(EnvironmentGone) as caught:
            launcher.spawn("a#1", "run-a", "worker", ["run-a"], {"DATABASE_URL": "postgresql://kp@127.0.0.1:9/kp"},
                           None)
        assert caught.value.code == "forkserver-stuck", caught.value
        assert f"(pid {servers[0].pid}) did not answer a spawn within 1 s" in str(caught.value)
        assert "T is stopped" in str(caught.value)
    finally:
        launcher.close()
    gone, alive = psutil.wait_procs(servers, timeout=10)
    assert alive == [], alive
