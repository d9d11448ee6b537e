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
5. Python runs a signal's handler at the next bytecode it can, which may be inside a function whose
   exceptions it ignores: an at-fork hook (``logging``'s, run by every ``subprocess.Popen``), a finalizer.
   The stop raised there is only printed ("Exception ignored in ...") and the run went on as if no signal
   had come (a Ctrl-C while Postgres was starting, seen under load). So ``install()`` also hooks
   ``sys.unraisablehook``: the stop this handler raised, swallowed so, is taken back and the signal sent
   again, until it is raised where it can stop the command.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)


class _Stopper:
    """The handler of both signals (flow steps 2 and 3)."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.raised: BaseException | None = None
        """The stop this handler raised (flow step 2), to know it again if Python swallows it (step 5)."""
        self._noted = False

    def __call__(self, signum: int, _frame: object) -> None:
        if self.first is None:
            self.first = signum
            self.raised = KeyboardInterrupt() if signum == signal.SIGINT else SystemExit(128 + signum)
            raise self.raised
        if not self._noted:
            self._noted = True
            print("killpoint: already stopping; cleaning up first", file=sys.stderr, flush=True)

    def swallowed(self, unraisable: Any) -> bool:
        """True if `unraisable` is the stop this handler raised, ignored where Python ignores exceptions: then
        it is forgotten and the signal sent again (flow step 5), from another thread a moment later. Sent
        from here, it would run the handler at once, still inside the ignoring function (`os.kill` and
        `signal.raise_signal` to this process call the handler before they return)."""
        if self.raised is None or unraisable.exc_value is not self.raised or self.first is None:
            return False
        signum, self.first, self.raised = self.first, None, None
        threading.Thread(target=_send_later, args=(signum,), name="killpoint-stop-again", daemon=True).start()
        return True


AGAIN_AFTER = 0.05
"""Seconds before a swallowed stop's signal is sent again: an at-fork hook or a finalizer returns in far less
(a deferral out of them, not a synchronisation; if the signal lands in one again, it is sent again)."""


def _send_later(signum: int) -> None:
    time.sleep(AGAIN_AFTER)
    os.kill(os.getpid(), signum)


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
    unraisable = sys.unraisablehook

    def hook(info: Any) -> None:
        if not stopper.swallowed(info):
            unraisable(info)

    sys.unraisablehook = hook

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if sys.unraisablehook is hook:
            sys.unraisablehook = unraisable

    return restore
