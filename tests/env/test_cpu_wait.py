"""`procutil.cpu_wait`: the seconds a process waited for a CPU, read from the kernel's schedstats."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from killpoint.env.procutil import cpu_wait


def test_a_running_process_has_a_wait_that_never_decreases_and_a_gone_one_has_none() -> None:
    if not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"):
        pytest.skip("this kernel keeps no schedstats (/proc/PID/task/TID/schedstat)")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        first = cpu_wait(proc.pid)
        assert first is not None and first >= 0
        second = cpu_wait(proc.pid)
        assert second is not None and second >= first
    finally:
        proc.communicate(b"")
    assert cpu_wait(proc.pid) is None
    assert cpu_wait(None) is None
