"""`timelimit.in_child` with `started_within` (harness/env/timelimit.py, flow step 5): the limit counts from
the moment the child says its timed work begins, so a step module's probe that ignores its alarm is killed
the import limit (and a grace) after its import began, not after the interpreter's start-up allowance too.

No timed assertion: each case gives the phase that must not be waited for 600 s, so waiting it (the old
bound: `started_within + seconds` from the start) would hang the test past its timeout instead of passing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.env import timelimit
from tests.helpers.sandbox import without_zygote

HANGS = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(600)\n"
SAYS_STARTED_THEN_HANGS = "from killpoint.env import timelimit\ntimelimit.started()\n" + HANGS
WRITES_ITS_PID_THEN_HANGS = "import os\nos.write(int(os.environ['KILLPOINT_REPORT_FD']), str(os.getpid()).encode())\n" + HANGS


@pytest.fixture(autouse=True)
def no_zygote() -> Iterator[None]:
    """A fresh interpreter, as a user's probe gets (test_zygote covers the forked one)."""
    with without_zygote():
        yield


def test_a_child_that_said_it_started_has_seconds_from_then() -> None:
    """Said STARTED, then hangs: killed `seconds` after, though `started_within` is 600 s; its report is
    empty (STARTED is not part of it)."""
    child = timelimit.in_child([sys.executable, "-c", SAYS_STARTED_THEN_HANGS], 0.5, started_within=600)
    assert child.exit_code is None and child.report == b""


def test_what_a_child_writes_before_it_says_started_is_its_report_and_it_is_bounded_from_its_start() -> None:
    """A child whose first bytes are not STARTED (it wrote its pid) is bounded by `started_within + seconds`
    from its start (here 1 s), and its report keeps every byte it wrote."""
    child = timelimit.in_child([sys.executable, "-c", WRITES_ITS_PID_THEN_HANGS], 0.5, started_within=0.5)
    assert child.exit_code is None
    pid = int(child.report)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_child_that_ends_before_it_says_started_is_not_waited_for() -> None:
    """Ended without STARTED (its interpreter failed, its command exited): its exit code and report at
    once, not after `started_within` (600 s)."""
    child = timelimit.in_child([sys.executable, "-c", "import os, sys\nfrom killpoint.env import timelimit\n"
                                "os.write(int(os.environ[timelimit.REPORT_FD]), b'{\"a\": 1}')\nsys.exit(4)\n"],
                               600, started_within=600)
    assert child.exit_code == 4 and json.loads(child.report) == {"a": 1}


def test_a_report_after_started_is_read_whole() -> None:
    """STARTED, then a JSON report and a clean exit: the report without the STARTED byte."""
    child = timelimit.in_child([sys.executable, "-c", "import os\nfrom killpoint.env import timelimit\n"
                                "timelimit.started()\n"
                                "os.write(int(os.environ[timelimit.REPORT_FD]), b'{\"ok\": true}')\n"],
                               600, started_within=600)
    assert child.exit_code == 0 and child.report == b'{"ok": true}'


def test_a_probe_of_a_module_that_ignores_its_alarm_is_refused_within_the_limit_and_grace(tmp_path: Path) -> None:
    """`stepmodule.probe` of a module that ignores SIGALRM and loops: refused as `steps-import-timeout` once
    its import limit and grace are past, with the start-up allowance raised to 600 s (which the refusal must
    not wait for)."""
    (tmp_path / "spins.py").write_text("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                       "while True:\n    pass\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from killpoint.env import stepmodule\nstepmodule.STARTUP_SECONDS = 600\n"
            "stepmodule.ALARM_GRACE_SECONDS = 0.5\n"
            "from killpoint.errors import UsageError\n"
            "try:\n    stepmodule.probe('spins', 0.5)\nexcept UsageError as exc:\n    print(exc.code)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KILLPOINT_IMPORT_TIMEOUT": "0.5"})
    assert proc.stdout.strip() == "steps-import-timeout", proc.stdout + proc.stderr
