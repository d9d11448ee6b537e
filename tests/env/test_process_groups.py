"""Every incarnation is a process group, and nothing it started outlives it unseen (issue 13, item 4).

A `--worker-cmd` shell that starts `sleep &` grandchildren, and a forked worker whose code forks a child:
`Incarnation.leftovers()` lists the grandchildren while they live, and a SIGKILL of the incarnation takes
them with it. A grandchild that leaves the group (`setsid`) survives that SIGKILL (the limit of process
groups) but is still listed, and `Launcher.close()` kills it; the fork server adopts it as a subreaper. When
the harness itself is SIGKILLed, the fork server kills the groups it made.

The grandchildren report their pids through a FIFO: the test blocks on it instead of sleeping.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import Incarnation, Launcher
from killpoint.env.procutil import wait_gone
from killpoint.env.stepmodule import DEFAULT_STEPS

ROOT = str(Path(__file__).resolve().parents[2])
TIMEOUT = 30.0

FORKING_STEPS = '''
"""Not a step module: importing it (the worker's first act) forks a child, which reports its pid on the
FIFO, optionally after leaving the process group; both then wait forever."""
import os, signal

def _hold():
    while True:
        signal.pause()

if os.fork() == 0:
    try:
        if os.environ.get("KP_TEST_SETSID"):
            os.setsid()
        with open(os.environ["KP_TEST_FIFO"], "w") as out:
            out.write(f"{os.getpid()}\\n")
        _hold()
    finally:
        os._exit(0)
_hold()
'''

SHELL_GROUP = 'sleep 1000 & a=$!; sleep 1000 & echo "$a $!" > "$1"; wait'
SHELL_ESCAPE = """setsid sh -c 'echo $$ > "$0"; exec sleep 1000' "$1" & wait"""


def read_fifo(path: Path, timeout: float = TIMEOUT) -> list[int]:
    """The pids written on the FIFO by the first writer (blocks until its line, at most `timeout` s)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"nothing on {path} after {timeout}s")
            chunk = os.read(fd, 4096)
            if not chunk and data:
                break
            data += chunk
    finally:
        os.close(fd)
    return [int(x) for x in data.split()]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid`."""
    out = []
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(OSError):
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
    return out


def listed(inc: Incarnation) -> set[int]:
    return {int(line.split()[1]) for line in inc.leftovers()}


def eventually(condition: object, what: str) -> None:
    """For a state the kernel gives no event for (a stop of another's child): re-check until `TIMEOUT`."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pids"
    os.mkfifo(path)
    return path


@pytest.fixture
def bystander() -> Iterator[psutil.Process]:
    """An unrelated process started by the test: it must never be listed or killed."""
    proc = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    yield psutil.Process(proc.pid)
    proc.kill()
    proc.wait()


def fork_launcher(tmp_path: Path) -> ForkLauncher:
    (tmp_path / "kp_forking_steps.py").write_text(FORKING_STEPS)
    path = os.pathsep.join(p for p in (str(tmp_path), ROOT, os.environ.get("PYTHONPATH")) if p)
    return ForkLauncher([DEFAULT_STEPS], env={**os.environ, "PYTHONPATH": path})


def worker_env(fifo: Path, setsid: bool = False) -> dict[str, str]:
    return {**os.environ, "KILLPOINT_STEPS": "kp_forking_steps", "KP_TEST_FIFO": str(fifo),
            "KP_TEST_SETSID": "1" if setsid else "", "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}


def spawn(kind: str, tmp_path: Path, fifo: Path, setsid: bool) -> tuple[Launcher, Incarnation]:
    """A fork-launched worker that forks a child, or an exec'd shell that starts `sleep` grandchildren."""
    launcher: Launcher
    if kind == "fork":
        launcher = fork_launcher(tmp_path)
        env = worker_env(fifo, setsid)
    else:
        launcher = ExecLauncher(["sh", "-c", SHELL_ESCAPE if setsid else SHELL_GROUP, "sh", str(fifo)])
        env = dict(os.environ)
    try:
        return launcher, launcher.spawn("w#1", "r-1", "worker", ["r-1"], env, str(tmp_path / "w.log"))
    except BaseException:
        launcher.close()
        raise


@pytest.mark.parametrize("kind", ["exec", "fork"])
def test_grandchildren_are_listed_and_die_with_the_incarnation(kind: str, tmp_path: Path, fifo: Path,
                                                               bystander: psutil.Process) -> None:
    launcher, inc = spawn(kind, tmp_path, fifo, setsid=False)
    try:
        grandchildren = read_fifo(fifo)
        assert grandchildren and inc.pgid == inc.pid
        assert {os.getpgid(pid) for pid in grandchildren} == {inc.pid}  # one group per incarnation
        assert os.getpgid(inc.pid) == inc.pid != os.getpgid(0)
        assert listed(inc) == {inc.pid, *grandchildren}  # the leader and each grandchild, nothing else
        assert all(line.startswith("pid ") and "(" in line for line in inc.leftovers())
        procs = [psutil.Process(pid) for pid in grandchildren]

        assert inc.send(signal.SIGKILL)
        assert inc.ended.wait(TIMEOUT) and inc.signal == signal.SIGKILL
        assert wait_gone(procs, TIMEOUT) == []  # killed with it, not left to run
        assert group_members(inc.pgid) == []
        assert inc.leftovers() == []
        assert bystander.is_running() and bystander.status() != psutil.STATUS_ZOMBIE
    finally:
        launcher.close()


@pytest.mark.parametrize("kind", ["exec", "fork"])
def test_an_escaped_grandchild_is_still_listed_and_killed_at_close(kind: str, tmp_path: Path, fifo: Path,
                                                                  bystander: psutil.Process) -> None:
    launcher, inc = spawn(kind, tmp_path, fifo, setsid=True)
    closed = False
    try:
        (escapee,) = read_fifo(fifo)
        proc = psutil.Process(escapee)
        assert os.getpgid(escapee) == escapee != inc.pgid  # it left the group
        assert escapee in listed(inc)

        assert inc.send(signal.SIGKILL)
        assert inc.ended.wait(TIMEOUT)
        assert alive(escapee)  # the group's SIGKILL cannot reach it...
        if kind == "fork":  # ...the fork server adopted it (subreaper), not init
            assert psutil.Process(escapee).ppid() == launcher.server_pid  # type: ignore[attr-defined]
        assert listed(inc) == {escapee}  # ...but it is seen: no_orphans fails on it

        launcher.close()
        closed = True
        assert wait_gone([proc], TIMEOUT) == []  # close() waits itself: this only reads the outcome
        assert not alive(escapee) and inc.leftovers() == []
        assert bystander.is_running() and bystander.status() != psutil.STATUS_ZOMBIE
    finally:
        if not closed:
            launcher.close()


def test_sigterm_goes_to_the_leader_only_and_kill_all_takes_the_rest(tmp_path: Path, fifo: Path) -> None:
    """SIGTERM is delivered as Kubernetes does, to the main process only; what it leaves is listed, and
    `kill_all()` ends it."""
    launcher, inc = spawn("exec", tmp_path, fifo, setsid=False)
    try:
        grandchildren = read_fifo(fifo)
        assert inc.send(signal.SIGTERM)
        assert inc.ended.wait(TIMEOUT) and inc.signal == signal.SIGTERM
        assert all(alive(pid) for pid in grandchildren)
        assert listed(inc) == set(grandchildren)
        killed = inc.kill_all()
        assert {int(line.split()[1]) for line in killed} == set(grandchildren)
        assert not any(alive(pid) for pid in grandchildren) and group_members(inc.pgid) == []
    finally:
        launcher.close()


def test_stop_and_cont_freeze_and_thaw_the_whole_group(tmp_path: Path, fifo: Path) -> None:
    launcher, inc = spawn("fork", tmp_path, fifo, setsid=False)
    try:
        (child,) = read_fifo(fifo)
        assert inc.send(signal.SIGSTOP) and inc.stopped.wait(TIMEOUT)
        eventually(lambda: psutil.Process(child).status() == psutil.STATUS_STOPPED, "the child to stop")
        assert inc.send(signal.SIGCONT) and inc.continued.wait(TIMEOUT)
        eventually(lambda: psutil.Process(child).status() != psutil.STATUS_STOPPED, "the child to go on")
    finally:
        launcher.close()
    assert not alive(child)


HARNESS = """
import os, sys, threading
sys.path.insert(0, {here!r})
from test_process_groups import spawn, read_fifo
from pathlib import Path
launcher, inc = spawn({kind!r}, Path({tmp!r}), Path({fifo!r}), setsid=False)
print(inc.pid, *read_fifo(Path({fifo!r})), flush=True)
threading.Event().wait()
"""


@pytest.mark.parametrize("kind", ["exec", "fork"])
def test_a_sigkilled_harness_takes_the_grandchildren_with_it(kind: str, tmp_path: Path, fifo: Path) -> None:
    """The worker dies by its parent-death signal, which what it started does not have: the fork server's
    own (SIGTERM) makes it kill the groups it made before it exits; for exec'd workers the launcher's guard
    process sees its stdin close and kills them."""
    code = textwrap.dedent(HARNESS).format(tmp=str(tmp_path), here=str(Path(__file__).parent), fifo=str(fifo),
                                           kind=kind)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    harness = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert harness.stdout is not None
    procs: list[psutil.Process] = []
    try:
        line = harness.stdout.readline()
        assert line, f"the harness exited with {harness.poll()}"
        procs = [psutil.Process(int(pid)) for pid in line.split()]  # the worker, then what it started
        assert len(procs) >= 2
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        assert wait_gone(procs, TIMEOUT) == []
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        harness.stdout.close()
        for proc in procs:  # never leak them into the machine, even when the test failed
            with contextlib.suppress(psutil.Error):
                proc.kill()


LEAKY_WORKER = ("sh -c 'sleep 1000 & exec env -u KILLPOINT_SOCKET python -m killpoint.reference_agent.worker \"$0\"' "
                "{run_id}")
"""The black-box reference worker, started by a shell that first leaves a `sleep` running in the background."""


def test_no_orphans_fails_a_worker_that_leaves_a_grandchild_and_the_harness_kills_it(sandbox, tmp_path: Path) -> None:  # noqa: ANN001 - conftest's Sandbox
    out = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                      "--worker-cmd", LEAKY_WORKER, "--out", str(tmp_path / "runs"), "--quiet")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "no_orphans: fail" in out.stdout and "sleep 1000" in out.stdout, out.stdout
    assert sandbox.survivors() == []  # reported, then killed when the harness closed
