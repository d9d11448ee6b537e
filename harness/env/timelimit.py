"""A time limit for a user's code that runs inside the harness (importing a step module).

1. ``within(seconds, fn)`` calls ``fn()`` and returns its value.
2. In the main thread, a real-time timer (``setitimer``) raises ``TimedOut`` inside ``fn`` once ``seconds``
   have passed: a module that loops at import, or sleeps, is stopped there. Elsewhere (a thread may not
   take signals) ``fn`` runs without a limit.
3. The timer and the previous SIGALRM handler are restored however ``fn`` ends.
4. ``in_child(argv, seconds)`` bounds what an alarm cannot (code that ignores SIGALRM, swallows the
   ``TimedOut``, or ends the process): it runs ``argv`` in a process group of its own, with stdin, stdout and
   stderr on /dev/null and ``KILLPOINT_REPORT_FD`` naming a pipe the child writes its report to; past
   ``seconds`` the whole group is killed (SIGKILL), and so is whatever the child left in it when it ends.
   It returns a ``Child``: the exit code (None when killed at the limit) and the report's bytes.
5. ``in_child(argv, seconds, started_within=S)`` counts ``seconds`` from the moment the child says its timed
   work begins (``started()``: one space, ``STARTED``, on the report pipe, which a JSON report may lead
   with), not from its start: the child has ``S`` seconds to get there (an interpreter's start is slow on a
   loaded machine), then ``seconds``. A child that ends or goes quiet before saying so is bounded by
   ``S + seconds`` from its start, as without ``S``.

``KILLPOINT_IMPORT_TIMEOUT`` (seconds) overrides ``IMPORT_SECONDS``, the limit the harness uses for imports.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from killpoint.env import zygote

T = TypeVar("T")
IMPORT_SECONDS = 60.0
REPORT_FD = "KILLPOINT_REPORT_FD"
"""The environment variable naming the pipe an `in_child` child writes its report to (flow step 4)."""
STARTED = b" "
"""What a child writes to its report pipe when its timed work begins (flow step 5)."""


class TimedOut(BaseException):
    """``fn`` ran past its limit (a BaseException, so a user's ``except Exception`` cannot swallow it)."""


def import_seconds() -> float:
    """The import limit: ``KILLPOINT_IMPORT_TIMEOUT`` if it is a positive number, else ``IMPORT_SECONDS``."""
    try:
        value = float(os.environ.get("KILLPOINT_IMPORT_TIMEOUT", ""))
    except ValueError:
        return IMPORT_SECONDS
    return value if 0 < value < float("inf") else IMPORT_SECONDS


def within(seconds: float, fn: Callable[[], T]) -> T:
    """``fn()``, stopped with ``TimedOut`` after ``seconds`` (see the module doc)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return fn()

    def expire(_signum: int, _frame: object) -> None:
        raise TimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Child:
    """How an `in_child` child ended: its exit code (negative: a signal; None: killed at the limit) and what
    it wrote to its report pipe."""

    exit_code: int | None
    report: bytes


def started() -> None:
    """In an `in_child` child: say that the timed work begins (flow step 5)."""
    os.write(int(os.environ[REPORT_FD]), STARTED)


def in_child(argv: Sequence[str], seconds: float, started_within: float | None = None) -> Child:
    """Flow steps 4-5: run `argv` for at most `seconds` (after it said it `started`, within `started_within`)."""
    # imported here: psutil and the launchers, ~35 ms that every CLI start would pay (cli/args.py)
    from killpoint.env import zygote

    read_end, write_end = os.pipe()
    env = {**os.environ, REPORT_FD: str(write_end)}
    try:
        # A Python child forked by a zygote that imported the SDK already, where the environment names one
        # (killpoint's own test suite: harness/env/zygote.py); else a fresh process, as always.
        proc: subprocess.Popen[bytes] | zygote.ZygoteProcess = (
            argv[0] == sys.executable and zygote.popen(list(argv[1:]), env, {write_end: write_end}, new_session=True)
        ) or subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=(write_end,), env=env)
    finally:
        os.close(write_end)
    head = b""
    try:
        if started_within is not None:
            seconds, head = _after_start(read_end, started_within, seconds)
        code: int | None = proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        code = None
    finally:  # the group: the child at the limit, else what it left behind (a user's Ctrl-C included)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return Child(code, head + _drain(read_end))


def _after_start(fd: int, started_within: float, seconds: float) -> tuple[float, bytes]:
    """How long to wait for the child's end from now, and what was read of its report: `seconds` once it
    has said `STARTED` on `fd` (waited for up to `started_within`), else what is left of `started_within +
    seconds` (it wrote something else first, or ended: its end closes the pipe's last write end, unless it
    left a process holding one) with what it wrote."""
    begun = time.monotonic()
    readable, _, _ = select.select([fd], [], [], started_within)
    first = os.read(fd, len(STARTED)) if readable else b""
    if first == STARTED:
        return seconds, b""
    return max(0.0, started_within + seconds - (time.monotonic() - begun)), first


def _drain(fd: int) -> bytes:
    """What the pipe holds now, without waiting (a process that left the group may keep its write end open)."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)
