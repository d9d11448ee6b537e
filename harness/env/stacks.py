"""Stacks of a live worker: where an incarnation that hangs is blocked.

`dump(pid, log, stack_signal)` returns every thread's Python stack as lines, by the first way that works:

1. `py-spy dump --pid PID` when py-spy is on PATH and can attach (it reads the process from outside: the
   worker needs no cooperation, and is neither stopped for long nor changed).
2. Else, if the worker registered a stack signal (the reference worker registers `faulthandler` on SIGUSR1
   and names it in its `worker.start` note as `stack_signal`), send it and read what the worker wrote to its
   log after the log's end at the time of sending (waiting at most `timeout` seconds for the writing to end).
3. Else one line saying why there is no stack.

Never raises: a process that ended meanwhile, a py-spy that cannot attach or a signal that cannot be sent
each fall through to the next way. The signal is only sent to a worker that said it handles it: any other
process would be killed by SIGUSR1's default action.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

PY_SPY_TIMEOUT = 20.0


def dump(pid: int, log: str | None, stack_signal: str | None, timeout: float = 5.0) -> list[str]:
    """Every thread's stack of process `pid` (see the module doc); never empty."""
    lines = _py_spy(pid)
    if lines:
        return lines
    if stack_signal and log:
        lines = _signalled(pid, log, stack_signal, timeout)
        if lines:
            return lines
    return ["no stack: py-spy is not installed (or cannot attach) and the worker registered no stack signal"]


def _py_spy(pid: int) -> list[str]:
    exe = shutil.which("py-spy")
    if exe is None:
        return []
    try:
        done = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, text=True,
                              timeout=PY_SPY_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [line.rstrip() for line in done.stdout.splitlines() if line.strip()]


def _signalled(pid: int, log: str, stack_signal: str, timeout: float) -> list[str]:
    try:
        sig = signal.Signals[stack_signal]
        start = os.path.getsize(log)
        os.kill(pid, sig)
    except (KeyError, OSError):
        return []
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:  # the dump is written by the worker's own thread: wait until it stops
        time.sleep(0.1)
        with contextlib.suppress(OSError):
            size = os.path.getsize(log)
            if size > start and size == seen:
                break
            seen = size
    try:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()]
