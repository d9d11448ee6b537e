"""A harness SIGKILLed while holding a cluster: the next start reaps its server and folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from killpoint.env.postgres import provide
from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.reaper import clusters_root, reap_orphans
from killpoint.env.postgres.wait import Wait
from tests.helpers import REPO

pytestmark = pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")

HOLDER = """
import json, sys, threading
from killpoint.env.postgres import provide
with provide("local") as pg:
    print(json.dumps({"dir": str(pg.dir), "pid": pg.proc.pid, "dsn": pg.dsn}), flush=True)
    threading.Event().wait()
"""
ROOT = str(REPO)


def start_holder(extra_env: dict[str, str]) -> tuple[subprocess.Popen[str], dict]:
    env = {**os.environ, "PYTHONPATH": ROOT, **extra_env}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the cluster is up (or the holder died: empty line)
    assert line, f"holder exited with {proc.wait()}"
    return proc, json.loads(line)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_reaper_kills_server_and_removes_folder_of_sigkilled_owner() -> None:
    # Without the parent-death signal the server outlives its owner, as it would on a system without
    # prctl: the reaper alone must clean up.
    holder, info = start_holder({"KILLPOINT_PG_NO_PDEATHSIG": "1"})
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    folder = Path(info["dir"])
    assert folder.exists() and not gone(info["pid"]), "the dead owner's server should still be running"
    reaped = reap_orphans()
    assert folder.name in reaped
    assert not folder.exists()
    assert not any(p.name.endswith(folder.name) for p in clusters_root().iterdir())
    Wait("the orphaned postmaster to exit", 10).until(lambda: gone(info["pid"]) or None)


def test_server_dies_with_owner_and_next_start_removes_folder() -> None:
    holder, info = start_holder({})
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    Wait("the postmaster to follow its dead owner", 10).until(lambda: gone(info["pid"]) or None)
    folder = Path(info["dir"])
    assert folder.exists()
    with provide("local") as pg:  # a new start reaps first
        assert pg.dir != folder
        assert not folder.exists()


def test_reaper_leaves_live_owners_alone() -> None:
    with provide("local") as pg:
        reap_orphans()
        assert pg.dir is not None and pg.dir.exists() and pg.running
