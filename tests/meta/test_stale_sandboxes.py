"""A test process killed with its harness leaves its sandbox's cluster root (in /dev/shm where the machine
allows, which outlives it until a restart); the next test run removes it (tests/helpers/sandbox.py's
`reap_stale_roots`, run by tests/conftest.py's `stale_sandboxes`), and never what a live harness holds."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox, reap_stale_roots


def _ended() -> int:
    """The pid of a process that has ended (as a SIGKILLed test process's has)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def test_a_dead_test_process_s_cluster_root_is_removed_with_its_server_and_a_live_harness_s_kept(
        tmp_path: Path) -> None:
    """Two sandboxes owned by ended test processes, each with a harness mid-run: the one whose harness was
    SIGKILLed loses its root and nothing of it runs after; the one whose harness lives keeps its root and
    cluster (the harness's lock on it says so), as does a live test process's sandbox."""
    with Sandbox(tmp_path / "dead", owner=_ended()) as dead, Sandbox(tmp_path / "alive", owner=_ended()) as alive, \
            Sandbox(tmp_path / "live") as live:
        args = ("run", "--scenario", "crash-points", "--postgres", "local", "--quiet")
        killed = dead.start(*args, "--out", str(dead.out))
        running = alive.start(*args, "--out", str(alive.out))
        try:
            dead.until_faulted_run(killed)
            alive.until_faulted_run(running)
            assert any(dead.pg_root.iterdir()), "the harness's cluster folder"
            held = sorted(alive.pg_root.iterdir())
            assert held
            killed.kill()
            killed.communicate()
            removed = reap_stale_roots([dead.pg_root.parent])
            assert dead.pg_root in removed and not dead.pg_root.exists(), removed
            assert alive.pg_root not in removed and sorted(alive.pg_root.iterdir()) == held
            assert running.poll() is None
            assert live.pg_root.exists() and live.pg_root not in removed
        finally:
            _end(killed)
            _end(running)
        assert wait_for(lambda: not dead.survivors(), timeout=30, what="the killed harness's processes to end")
