"""Polling with a deadline: the only way killpoint's Postgres code waits for anything.

``Wait(...).until(check)`` calls ``check`` with a short, growing interval until it returns something other
than ``None``, or the deadline passes. On timeout it raises ``EnvironmentProblem`` whose message carries
the last lines of the server log (when one is given) and whose fix is the caller's hint. A ``check`` may
raise to fail fast (e.g. the server process exited).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from killpoint.errors import EnvironmentProblem

T = TypeVar("T")


def log_tail(log: Path | None, lines: int = 5) -> str:
    """The last ``lines`` non-empty lines of ``log`` joined by `` | `` (empty if there is no log)."""
    if log is None:
        return ""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept)


@dataclass
class Wait:
    """A deadline for one condition.

    ``what`` names the condition ("Postgres on port 5433 to accept connections"), ``timeout`` is in
    seconds, ``log`` is a file whose tail explains a timeout, ``hint`` is the fix shown to the user.
    """

    what: str
    timeout: float
    log: Path | None = None
    hint: str = "look at the server log named in this message"
    code: str = "timeout"
    first_interval: float = 0.002
    max_interval: float = 0.05

    def until(self, check: Callable[[], T | None]) -> T:
        """Return the first non-``None`` result of ``check()``; raise ``EnvironmentProblem`` at the deadline."""
        deadline = time.monotonic() + self.timeout
        interval = self.first_interval
        while True:
            result = check()
            if result is not None:
                return result
            now = time.monotonic()
            if now >= deadline:
                raise self.timed_out()
            time.sleep(min(interval, deadline - now))
            interval = min(interval * 1.5, self.max_interval)

    def timed_out(self) -> EnvironmentProblem:
        """The error raised on timeout (exposed so callers can raise the same shape elsewhere)."""
        tail = log_tail(self.log)
        where = f" (log {self.log}: {tail})" if tail else (f" (log {self.log} is empty)" if self.log else "")
        return EnvironmentProblem(
            self.code, f"gave up after {self.timeout:g}s waiting for {self.what}{where}", self.hint
        )
