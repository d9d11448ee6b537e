"""Ctrl-C and SIGTERM for the ``killpoint`` command: the first one stops the run, the rest wait for cleanup.

1. ``install()`` (called by ``main``) replaces the default SIGINT and SIGTERM handlers; a signal the caller
   set to be ignored (a shell's background job ignores SIGINT) stays ignored.
2. The first SIGINT raises ``KeyboardInterrupt``, the first SIGTERM ``SystemExit(143)``, in the main thread:
   the command's ``with`` blocks then stop workers, servers and folders in reverse order, and the command
   writes what it found so far (``killpoint.cli.interrupted``).
3. Every later SIGINT or SIGTERM while that cleanup runs is noted on stderr (once) and otherwise ignored:
   a burst of Ctrl-C never cuts the cleanup short, so nothing is left behind. (SIGKILL still ends the
   process at once; the next run's reaper removes what it left.)
4. The function ``install()`` returns puts the previous handlers back (``main`` calls it on the way out).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)


class _Stopper:
    """The handler of both signals (flow steps 2 and 3)."""

    def __init__(self) -> None:
        self.first: int | None = None
        self._noted = False

    def __call__(self, signum: int, _frame: object) -> None:
        if self.first is None:
            self.first = signum
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)
        if not self._noted:
            self._noted = True
            print("killpoint: already stopping; cleaning up first", file=sys.stderr, flush=True)


def install() -> Callable[[], None]:
    """Install the handlers (flow step 1); return the function that restores the previous ones."""
    stopper = _Stopper()
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # only the main thread may set handlers (a test calling main from a thread)
    for sig in HANDLED:
        current = signal.getsignal(sig)
        if current in (signal.SIG_DFL, signal.default_int_handler):
            previous[sig] = current
            signal.signal(sig, stopper)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
