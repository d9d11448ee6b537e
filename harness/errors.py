"""Errors a user can act on.

Every error killpoint expects a user to meet (a missing Postgres, a taken port, a refused DSN, a bad
option) is a ``KillpointError``: a short code, what happened, and how to fix it. The CLI prints
``e.line()`` to stderr and exits with ``e.exit_code`` (2); no traceback is shown for these.
"""

from __future__ import annotations


class KillpointError(Exception):
    """A problem with a known cause and fix.

    ``code`` is a short stable id (``no-postgres``, ``dsn-refused``...), ``message`` says what happened
    and why, ``fix`` what the user can do. Neither needs a trailing full stop; ``line()`` adds them.
    """

    exit_code: int = 2

    def __init__(self, code: str, message: str, fix: str) -> None:
        self.code = code
        self.message = _one_line(message).rstrip(". ")
        self.fix = _one_line(fix).rstrip(". ")
        super().__init__(self.line())

    def line(self) -> str:
        """One line: ``killpoint: error[<code>]: <message>. Fix: <fix>``."""
        return f"killpoint: error[{self.code}]: {self.message}. Fix: {self.fix}"


def _one_line(text: str) -> str:
    """``text`` with its line breaks (and the blanks around them) made single spaces: an error is one line,
    even when it quotes a library's multi-line message."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) if "\n" in text or "\r" in text \
        else text


class EnvironmentProblem(KillpointError):
    """The machine lacks something (Postgres, Docker, a free port) or a server misbehaved. Exit 2."""


class UsageError(KillpointError):
    """The user asked for something that cannot be done as asked (bad option, unsafe DSN). Exit 2."""
