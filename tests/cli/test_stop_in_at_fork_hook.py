"""A Ctrl-C (or SIGTERM) whose handler runs inside an at-fork hook still stops the command (cli/signals.py, 5).

Python runs a signal's handler at the next bytecode it can, which may be inside an at-fork hook: logging's
runs in the parent after every `subprocess.Popen`. An exception raised there is only printed ("Exception
ignored in: <function _releaseLock>") and the run went on to its end, exit 0, as if no Ctrl-C had come. Seen
in tests/run/test_no_orphans.py (a Ctrl-C while Postgres was starting) under load. Here the signal is made to
land in such a hook every time: a hook of the script's own raises it and calls a function.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.sandbox import default_sigint

SCRIPT = """
import os, signal, sys, time
from killpoint.cli import signals

def meets_the_signal() -> None:
    signal.raise_signal(signal.SIGINT if sys.argv[1] == "int" else signal.SIGTERM)
    (lambda: None)()  # a call: Python runs the handler here, inside the hook, which ignores what it raises

restore = signals.install()
os.register_at_fork(after_in_parent=meets_the_signal)
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(60)  # the stop comes back long before this ends
    print("went on")
except KeyboardInterrupt:
    print("stopped: KeyboardInterrupt")
except SystemExit as exc:
    print(f"stopped: SystemExit({exc.code})")
restore()
assert sys.unraisablehook is sys.__unraisablehook__
"""


@pytest.mark.parametrize(("sig", "stop"), [("int", "KeyboardInterrupt"), ("term", "SystemExit(143)")])
def test_a_stop_swallowed_in_an_at_fork_hook_is_raised_again(sig: str, stop: str) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, sig], capture_output=True, text=True, timeout=120,
                          preexec_fn=default_sigint)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"stopped: {stop}", done.stdout + done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


def test_another_unraisable_exception_is_still_printed() -> None:
    code = ("from killpoint.cli import signals\nsignals.install()\n"
            "class Loud:\n    def __del__(self):\n        raise ValueError('said')\nLoud()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=default_sigint)
    assert done.returncode == 0 and "Exception ignored" in done.stderr and "ValueError: said" in done.stderr, done.stderr
