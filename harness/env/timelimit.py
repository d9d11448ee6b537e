"""A time limit for a user's code that runs inside the harness (importing a step module).

1. ``within(seconds, fn)`` calls ``fn()`` and returns its value.
2. In the main thread, a real-time timer (``setitimer``) raises ``TimedOut`` inside ``fn`` once ``seconds``
   have passed: a module that loops at import, or sleeps, is stopped there. Elsewhere (a thread may not
   take signals) ``fn`` runs without a limit.
3. The timer and the previous SIGALRM handler are restored however ``fn`` ends.

``KILLPOINT_IMPORT_TIMEOUT`` (seconds) overrides ``IMPORT_SECONDS``, the limit the harness uses for imports.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
IMPORT_SECONDS = 60.0


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
