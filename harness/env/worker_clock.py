"""The wall clock an incarnation reads: how a `clock` fault reaches the worker.

A run's clock shift (the sum of its `clock±N` faults so far, in seconds) goes into the environment of every
later incarnation of the run:

1. a worker of the reference runtime (a step module, forked or exec'd) reads `KILLPOINT_CLOCK_OFFSET`, and its
   runtime moves `time.time`, `datetime.now` and their kin by it (`reference_agent/clock.py`);
2. a black-box worker (`--worker-cmd`) is run under libfaketime (`LD_PRELOAD` with `FAKETIME="+N"`, the
   monotonic clock left alone), which moves the clock of any dynamically linked program; where libfaketime
   is not installed (Debian: `apt-get install faketime`), `unsupported` says so and the fault is recorded
   as missed (the trial is then unknown, never passed). A statically linked program (a Go binary) and a
   program that reads the clock through its own system calls are not moved by libfaketime.

A shift of 0 adds nothing: runs without clock faults see the machine's clock, unchanged.
"""

from __future__ import annotations

import glob
import os

OFFSET_VAR = "KILLPOINT_CLOCK_OFFSET"
FAKETIME_GLOBS = ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
                  "/usr/local/lib/faketime/libfaketime.so.1", "/usr/lib64/faketime/libfaketime.so.1")
"""Where Debian, Fedora and a source build install libfaketime."""


def faketime_library() -> str | None:
    """The path of libfaketime on this machine (`KILLPOINT_FAKETIME_LIB` overrides), or None."""
    given = os.environ.get("KILLPOINT_FAKETIME_LIB")
    if given:
        return given if os.path.exists(given) else None
    for pattern in FAKETIME_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def unsupported(black_box: bool) -> str | None:
    """Why a clock fault cannot move this session's workers' clock, or None when it can."""
    if black_box and faketime_library() is None:
        return ("libfaketime is not installed, so a --worker-cmd worker's clock cannot be moved "
                "(install it: apt-get install faketime; or set KILLPOINT_FAKETIME_LIB)")
    return None


def clock_env(offset: float, black_box: bool, existing_preload: str | None = None) -> dict[str, str]:
    """The variables that move an incarnation's clock by `offset` seconds (nothing for 0)."""
    if not offset:
        return {}
    if not black_box:
        return {OFFSET_VAR: repr(float(offset))}
    lib = faketime_library()
    if lib is None:
        return {}
    preload = " ".join(p for p in (lib, existing_preload) if p)
    return {"LD_PRELOAD": preload, "FAKETIME": f"{int(offset):+d}", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    # not OFFSET_VAR: a --worker-cmd that runs the reference runtime would move its clock twice
