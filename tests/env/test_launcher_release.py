"""A launcher releases a run's ended incarnations once its evidence is read (`Launcher.release`, called by a
CLI session as it forgets each judged run): over a long session it holds its live incarnations, not every
one it ever started; a live one is never released, and `close` still kills what is alive."""

from __future__ import annotations

import socket
import sys

import pytest

from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import Launcher

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
