"""Small process helpers shared by the launchers: parent-death signals and exit-status decoding."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send `sig` to this process when the thread that forked it dies (no-op elsewhere).

    This is what makes a SIGKILLed harness take its fork server and workers with it.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def decode_status(status: int) -> tuple[int | None, int | None]:
    """(exit_code, signal) from a waitpid status; exactly one is not None."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status), None
