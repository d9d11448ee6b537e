"""A child dies with its parent even when the parent died first: `die_with_parent(sig, parent)` ends a child
whose parent is gone before the request (no signal would ever come: the restarted postmaster that outlived
a SIGKILLed harness, tests/hostile/test_restarted_server.py, seen in whole-suite runs), and even when the
parent ignores the death signal (the cause of those runs' survivor: they were started as background jobs)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import psutil
import pytest

from killpoint.env.postgres.process import popen_dying_with_us
from killpoint.env.procutil import dying_with_us, wait_gone

ASK = "import sys; from killpoint.env.procutil import die_with_parent; die_with_parent(9, int(sys.argv[1])); print('alive')"


def test_a_child_whose_parent_is_not_the_one_it_was_forked_by_ends_at_once() -> None:
    orphaned = subprocess.run([sys.executable, "-c", ASK, "1"], capture_output=True, text=True, timeout=60)
    assert (orphaned.returncode, orphaned.stdout) == (1, "")
    kept = subprocess.run([sys.executable, "-c", ASK, str(os.getpid())], capture_output=True, text=True, timeout=60)
    assert (kept.returncode, kept.stdout.strip()) == (0, "alive")


def test_children_started_to_die_with_us_run_while_we_live() -> None:
    """The `preexec_fn`s of the launchers (`dying_with_us`) and of Postgres (`popen_dying_with_us`) let a
    child whose parent lives become its program."""
    for start in (lambda argv: subprocess.Popen(argv, stdout=subprocess.PIPE, preexec_fn=dying_with_us()),  # noqa: PLW1509
                  lambda argv: popen_dying_with_us(argv, stdout=subprocess.PIPE)):
        proc = start([sys.executable, "-c", "print('ran')"])
        out, _ = proc.communicate(timeout=60)
        assert (proc.returncode, out.strip()) == (0, b"ran")


STARTER = """
import signal, subprocess, sys
from killpoint.env.postgres.process import popen_dying_with_us
from killpoint.env.procutil import dying_with_us
assert signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN  # as in a shell's background job
sig = signal.Signals[sys.argv[1]]
argv = ["sleep", "300"]  # a program that keeps the dispositions exec gives it
child = popen_dying_with_us(argv, sig) if sig == signal.SIGQUIT else subprocess.Popen(argv, preexec_fn=dying_with_us(sig))
print(child.pid, flush=True)
sys.stdin.read()
"""


def _ignoring(*sigs: signal.Signals) -> Callable[[], None]:
    return lambda: [signal.signal(s, signal.SIG_IGN) for s in sigs] and None


@pytest.mark.parametrize("sig", ["SIGQUIT", "SIGTERM"])
def test_a_death_signal_the_parent_ignores_still_ends_the_child(sig: str) -> None:
    """A harness started as a shell's background job (`cmd &`, as CI steps run) has SIGINT and SIGQUIT
    ignored, and exec keeps a signal ignored: the postmaster's death signal (SIGQUIT) was then dropped when
    the harness died before the server installed its handler (a restarted postmaster outlived its harness in
    whole-suite runs started that way). `sleep` never installs one, so it shows the disposition exec gave."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER, sig], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, preexec_fn=_ignoring(signal.SIGQUIT, signal.SIGTERM))  # noqa: PLW1509
    assert starter.stdout is not None
    child = psutil.Process(int(starter.stdout.readline()))
    try:
        ignored = int(next(line for line in open(f"/proc/{child.pid}/status") if line.startswith("SigIgn:")).split()[1], 16)
        assert not ignored & (1 << (signal.Signals[sig] - 1)), f"{sig} still ignored in the child"
        starter.kill()
        starter.wait(timeout=60)
        assert not wait_gone([child], 60), f"the child outlived its parent: {child}"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
