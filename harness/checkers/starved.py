"""Whether a busy machine, not the worker, explains a worker's lateness.

A worker SIGKILLed at the end of its grace period, one that missed its own drain deadline, or one still
running when its run's time budget ran out is no evidence of a bug when it spent a large share of that
time runnable but waiting for a CPU (the kernel's `run_delay`, `procutil.cpu_wait`): on a loaded machine a
slow worker cannot be told from a stuck one. Its checker then says UNKNOWN with `starved`'s line, never
FAIL.
"""

from __future__ import annotations

STARVED_FRACTION = 0.25
"""A worker that waited for a CPU this share of a period or more was kept from running by a busy machine."""


def starved(inc: str | None, waited: object, period: float | None, what: str) -> str:
    """Why a worker that `what` (e.g. "was SIGKILLed at the end of its 5s grace period") cannot be judged:
    it spent `waited` seconds of the `period` waiting for a CPU, STARVED_FRACTION of it or more; else ''
    (also when either is unknown)."""
    if not isinstance(waited, (int, float)) or not period or waited < STARVED_FRACTION * period:
        return ""
    return (f"{inc} {what}, but it spent {waited:.1f}s of it waiting for a CPU: the machine was too busy to tell "
            "a slow worker from a stuck one (run it again on a quieter machine, with fewer -j, or a longer "
            "--grace or --run-timeout)")
