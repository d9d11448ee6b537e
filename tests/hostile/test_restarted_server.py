"""A server restarted by a ``db-crash`` fault ends with a SIGKILLed harness, like the first one (issue 29,
item 6). The kernel's parent-death signal is tied to the thread that forked the server: the restart, made
from a trial's thread, used to leave a postmaster running until the next start reaped it."""

from __future__ import annotations

import psutil
import pytest

from killpoint.env.postgres.binaries import find_local
from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox

pytestmark = pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")


def _postmasters(harness: psutil.Process, sandbox: Sandbox) -> set[int]:
    out = set()
    for child in harness.children():
        try:
            if child.name() == "postgres" and str(sandbox.pg_root) in " ".join(child.cmdline()):
                out.add(child.pid)
        except psutil.Error:
            continue
    return out


def test_a_restarted_server_dies_with_a_sigkilled_harness(sandbox: Sandbox) -> None:
    proc = sandbox.start("run", "--scenario", "db-crash", "--seed", "8", "--no-store", "--postgres", "local",
                         "--quiet", "--out", str(sandbox.out))
    try:
        harness = psutil.Process(proc.pid)
        (first,) = wait_for(lambda: _postmasters(harness, sandbox) or proc.poll() is not None, timeout=120,
                            what="the first postmaster")
        restarted = wait_for(lambda: (_postmasters(harness, sandbox) - {first}) or proc.poll() is not None,
                             timeout=240, what="a postmaster restarted by a db-crash fault")
        assert proc.poll() is None, "the run ended before its server was restarted"
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert restarted
    try:
        wait_for(lambda: not sandbox.survivors(), timeout=60, what="the restarted server to end with its harness")
    except AssertionError as exc:  # say who outlived it (whole-suite runs started as `cmd &`: tests/env/test_parent_death.py)
        raise AssertionError(f"{exc}; still alive: {sandbox.survivors()}") from None
