"""A launcher releases a run's ended incarnations once its evidence is read (`Launcher.release`, called by a
CLI session as it forgets each judged run): over a long session it holds its live incarnations, not every
one it ever started; a live one is never released, and `close` still kills what is alive."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import TAG_VAR, Launcher

PAUSE = [sys.executable, "-c", "import signal; signal.pause()"]


def held(launcher: Launcher) -> int:
    """Incarnations, fork-server leader pids and per-run seed counts the launcher holds."""
    seeds = len(launcher._seeds._seen)  # noqa: SLF001
    if isinstance(launcher, ForkLauncher):
        return len(launcher._by_pid) + sum(len(s.leaders) for s in launcher._servers) + seeds  # noqa: SLF001
    return len(launcher._procs) + seeds  # noqa: SLF001


@pytest.mark.parametrize("kind", ["exec", "fork"])
def test_release_drops_ended_incarnations_of_the_run_only(kind: str) -> None:
    """A forked reference worker is kept alive by a "Postgres" that accepts its connection and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as mute:
        env = {"DATABASE_URL": f"postgresql://kp@127.0.0.1:{mute.getsockname()[1]}/kp"}
        launcher: Launcher = ExecLauncher(PAUSE) if kind == "exec" else ForkLauncher(["json"], standby=False)
        try:
            ended = [launcher.spawn(f"a#{n}", "run-a", "worker", ["run-a"], env, None) for n in range(3)]
            live = launcher.spawn("b#1", "run-b", "worker", ["run-b"], env, None)
            for inc in ended:
                inc.send(9)
                assert inc.ended.wait(10)
            per_run = 2 if kind == "exec" else 3  # an incarnation (and its leader pid), its run's seed count
            assert held(launcher) == 4 * (per_run - 1) + 2, held(launcher)
            launcher.release("run-a")
            assert held(launcher) == per_run and not live.exited  # the live one, and its run's count, are kept
            launcher.release("run-b")
            assert held(launcher) == per_run - 1  # a live incarnation is kept; its ended run's count is not
        finally:
            launcher.close()
        assert live.ended.is_set()  # close killed what was alive


def test_the_exec_guard_forgets_what_the_launcher_released() -> None:
    """The guard (`python -m killpoint.env.exec_launcher`) kills, at its input's end, what the incarnations it
    was told of left, but not those told released (`- TAG`): a long session's guard holds only what may
    still need killing."""
    since = time.time()
    kept, released = ({TAG_VAR: uuid.uuid4().hex} for _ in range(2))
    procs = [subprocess.Popen(PAUSE, env={**os.environ, **tags}, process_group=0) for tags in (kept, released)]
    try:
        guard = subprocess.Popen([sys.executable, "-m", "killpoint.env.exec_launcher"], stdin=subprocess.PIPE,
                                 process_group=0)
        lines = [f"{p.pid} {psutil.Process(p.pid).create_time()!r} {tags[TAG_VAR]} {since!r}\n"
                 for p, tags in zip(procs, (kept, released), strict=True)]
        guard.communicate(("".join(lines) + f"- {released[TAG_VAR]}\n").encode(), timeout=60)
        assert guard.returncode == 0
        assert procs[0].wait(timeout=30) == -9  # told of, not released: killed
        assert procs[1].poll() is None  # released: left alone (the session had killed what it left)
    finally:
        for p in procs:
            p.kill()
            p.wait()
