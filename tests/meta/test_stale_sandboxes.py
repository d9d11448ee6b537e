"""A test process killed with its harness leaves its sandbox's cluster root (in /dev/shm where the machine
allows, which outlives it until a restart); the next test run removes it (tests/helpers/sandbox.py's
`reap_stale_roots`, run by tests/conftest.py's `stale_sandboxes`), and never a live test process's."""

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


def test_a_dead_test_process_s_cluster_root_is_removed_with_its_server(tmp_path: Path) -> None:
    """A sandbox owned by a dead test process whose harness was SIGKILLed mid-run: its root, holding the
    harness's cluster, is removed and nothing of it runs after; a live test process's root is kept."""
    with Sandbox(tmp_path / "dead", owner=_ended()) as dead, Sandbox(tmp_path / "live") as live:
        proc = dead.start("run", "--scenario", "crash-points", "--postgres", "local", "--quiet",
                          "--out", str(dead.out))
        try:
            dead.until_faulted_run(proc)
            assert any(dead.pg_root.iterdir()), "the harness's cluster folder"
            proc.kill()
            proc.communicate()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert dead.pg_root.exists() and live.pg_root.exists()
        removed = reap_stale_roots([dead.pg_root.parent])
        assert dead.pg_root in removed and not dead.pg_root.exists(), removed
        assert live.pg_root.exists() and live.pg_root not in removed
        assert wait_for(lambda: not dead.survivors(), timeout=30, what="the killed harness's processes to end")
