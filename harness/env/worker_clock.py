"""The wall clock an incarnation reads: how a `clock` fault reaches the worker.

A run's clock shift (the sum of its `clock±N` faults so far, in seconds) goes into the environment of every
later incarnation of the run:

1. a worker of the reference runtime (a step module, forked or exec'd) reads `KILLPOINT_CLOCK_OFFSET`, and its
   runtime moves `time.time`, `datetime.now` and their kin by it (`reference_agent/clock.py`);
2. a black-box worker (`--worker-cmd`) is run under libfaketime (`LD_PRELOAD` with `FAKETIME="+N"`, the
   monotonic clock left alone, as a real clock jump leaves it), which moves the clock of any dynamically
   linked program; where libfaketime is not installed (Debian: `apt-get install faketime`), `unsupported`
   says so and the fault is recorded as missed (the trial is then unknown, never passed). A statically linked
   program (a Go binary) and a program that reads the clock through its own system calls are not moved by
   libfaketime.

libfaketime up to 0.9.10 (Debian 12's) mistranslates an absolute sleep on the monotonic clock it was told to
leave alone (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, libfaketime issue #426): the kernel gets a
negative deadline and the call fails with EINVAL, so Python >= 3.11's `time.sleep` raises `OSError: [Errno
22]` in every worker under a shift. `clock_env` probes the library once (`monotonic_sleep_broken`) and, when
it is broken, preloads before it a small shim (`_SHIM_SOURCE`, built once with the C compiler into
`cshim.shim_dir()`) that hands a monotonic or boot-time `clock_nanosleep` to the kernel unchanged and any other to
libfaketime. Without a C compiler a broken libfaketime cannot move a clock faithfully, and `unsupported`
says so.

A shift of 0 adds nothing: runs without clock faults see the machine's clock, unchanged.

A black-box Python worker forked from a fork server (harness/env/pyfork_launcher.py) cannot be given a
preload: the fork is already loaded. Its incarnations under a shift are forked instead from servers started
under `fork_server_env` (libfaketime preloaded with a shift of 0 and its cache off, `FAKETIME_NO_CACHE=1`,
which libfaketime reads once, at load): libfaketime then reads `FAKETIME` from the process's environment
again at every wall-clock call (no system call; measured ~0.1-0.2 us more per `time.time()`), so a child
that takes an incarnation's environment (`FAKETIME=+N`, the same variables `clock_env` gives an exec'd one)
reads a wall clock moved by N from its first call on, in C as in Python, its monotonic clock unmoved
(`FAKETIME_DONT_FAKE_MONOTONIC`, also read at load, is the server's), and one whose environment has no
`FAKETIME` reads the machine's clock (libfaketime 0.9.10, tests/env/test_worker_clock.py).

libfaketime (0.9.x) loaded into a process whose environment has no `FAKETIME_SHARED` makes a POSIX
semaphore and a shared memory object named after that process's pid (`/dev/shm/sem.faketime_sem_<pid>`,
`/dev/shm/faketime_shm_<pid>`), names them in `FAKETIME_SHARED` for what it execs (which then makes none), and
removes them at its normal exit only: not when it is killed (a SIGKILLed worker, the point of a crash test),
nor when it exec'd another program (a shell or pyenv's shim that execs python: the program after the exec
finds them named in `FAKETIME_SHARED`, as not its own). So whoever started such a process removes its pair
once it has ended (`remove_leftovers`): the exec launcher for an incarnation's leader, the fork launcher for
a clock server (whose forks inherit its pair, made before the fork), the probe below for itself. A child
forked from a clock server takes its incarnation's environment with the server's `FAKETIME_SHARED` kept
(`sharing`), so a program it starts uses that pair and makes none that its death would leave.
"""

from __future__ import annotations

import functools
import glob
import os
import subprocess
import sys
from collections.abc import Mapping

from killpoint.env import cshim

OFFSET_VAR = "KILLPOINT_CLOCK_OFFSET"
FAKETIME_GLOBS = ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
                  "/usr/local/lib/faketime/libfaketime.so.1", "/usr/lib64/faketime/libfaketime.so.1")
"""Where Debian, Fedora and a source build install libfaketime."""

_SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* killpoint: libfaketime <= 0.9.10 breaks TIMER_ABSTIME sleeps on the monotonic clock it leaves alone
   (FAKETIME_DONT_FAKE_MONOTONIC, libfaketime issue #426); send those to the kernel unchanged. */
int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *req, struct timespec *rem) {
    static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
    if (clock_id == CLOCK_MONOTONIC || clock_id == CLOCK_BOOTTIME) {
        int saved = errno;
        long r = syscall(SYS_clock_nanosleep, clock_id, flags, req, rem);
        int err = r == 0 ? 0 : errno;
        errno = saved;
        return err;
    }
    if (!next)
        next = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "clock_nanosleep");
    return next(clock_id, flags, req, rem);
}
"""

_PROBE = r"""
import ctypes, time
class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
libc = ctypes.CDLL(None, use_errno=True)
t = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 1_000_000
print(libc.clock_nanosleep(time.CLOCK_MONOTONIC, 1, ctypes.byref(Timespec(t // 10**9, t % 10**9)), None))
"""
"""Prints what an absolute 1 ms sleep on the monotonic clock returns (0, or an error number) in a process
under the preload it is run with."""


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


SHIFT_VAR = "FAKETIME"
"""libfaketime's shift (`+N`, `-N` seconds): in an incarnation's environment exactly when its clock is moved."""
NO_CACHE_VAR = "FAKETIME_NO_CACHE"
"""Set (`1`) only in the environment fork servers start under (`fork_server_env`)."""


def _faketime_vars(offset: float, preload: str) -> dict[str, str]:
    return {"LD_PRELOAD": preload, SHIFT_VAR: f"{int(offset):+d}", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


SHM_DIR = "/dev/shm"
"""Where glibc's `shm_open` and `sem_open` put their files (Linux)."""
SHARED_VAR = "FAKETIME_SHARED"
"""Where libfaketime names the pair it made for what a process execs (the module doc)."""


def makes_own_pair(env: Mapping[str, str]) -> bool:
    """Whether a process started with `env` makes a libfaketime pair of its own (the module doc): it runs
    under a shift and no pair is named for it yet. Its starter then removes that pair (`remove_leftovers`)."""
    return SHIFT_VAR in env and SHARED_VAR not in env


def sharing(env: dict[str, str], server: Mapping[str, str]) -> dict[str, str]:
    """The environment a child forked from a clock server takes (`env`, an incarnation's), with the server's
    `FAKETIME_SHARED` kept where `env` runs under a shift: a program the incarnation starts under the
    inherited preload then uses the server's pair (which the fork launcher removes) instead of making one of
    its own, which it would leave in /dev/shm if it were killed with the incarnation."""
    if makes_own_pair(env) and SHARED_VAR in server:
        return {**env, SHARED_VAR: server[SHARED_VAR]}
    return env


def leftovers(pid: int, shm_dir: str = SHM_DIR) -> list[str]:
    """The paths of the semaphore and shared memory object libfaketime makes for the process `pid` (the
    module doc), whether or not they exist."""
    return [os.path.join(shm_dir, f"sem.faketime_sem_{pid}"), os.path.join(shm_dir, f"faketime_shm_{pid}")]


def remove_leftovers(pid: int, shm_dir: str = SHM_DIR) -> list[str]:
    """Remove what libfaketime made for `pid`, a process of ours that has ended (killed, it could not);
    returns the paths removed. Only the names of that one pid are touched: another program's pairs are
    not ours to remove, and a process still using a removed pair keeps it (it is mapped)."""
    removed = []
    for path in leftovers(pid, shm_dir):
        try:
            os.unlink(path)
        except OSError:
            continue  # not made (a normal exit removed it, or the process never loaded libfaketime)
        removed.append(path)
    return removed


def _sleep_result(preload: str) -> str:
    """What `_PROBE` prints under `preload` with a shift of a day ('' when the probe could not run)."""
    env = {**os.environ, **_faketime_vars(86400.0, preload)}
    env.pop(SHARED_VAR, None)
    try:
        with subprocess.Popen([sys.executable, "-c", _PROBE], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) as proc:
            try:
                out, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                out = ""
            remove_leftovers(proc.pid)
    except OSError:
        return ""
    return out.strip()


@functools.cache
def monotonic_sleep_broken(lib: str) -> bool:
    """Whether libfaketime at `lib` fails an absolute sleep on the monotonic clock it leaves alone."""
    return _sleep_result(lib) not in ("0", "")


@functools.cache
def sleep_shim() -> str | None:
    """The path of the built `_SHIM_SOURCE` (built now if need be), or None without a working C compiler."""
    return cshim.build("faketime-sleep", _SHIM_SOURCE)


def _preload(lib: str) -> str | None:
    """libfaketime's preload, with the sleep shim before it where the library needs it; None if it does and
    the shim cannot be built."""
    if not monotonic_sleep_broken(lib):
        return lib
    shim = sleep_shim()
    return None if shim is None else f"{shim} {lib}"


def unsupported(black_box: bool) -> str | None:
    """Why a clock fault cannot move this session's workers' clock, or None when it can."""
    if not black_box:
        return None
    lib = faketime_library()
    if lib is None:
        return ("libfaketime is not installed, so a --worker-cmd worker's clock cannot be moved "
                "(install it: apt-get install faketime; or set KILLPOINT_FAKETIME_LIB)")
    if _preload(lib) is None:
        return (f"{lib} fails absolute sleeps on the monotonic clock (libfaketime issue #426) and no C compiler "
                "builds killpoint's fix for it (install cc, or libfaketime >= 0.9.11)")
    return None


def fork_server_env(existing_preload: str | None = None) -> dict[str, str] | None:
    """The variables a fork server of black-box Python workers starts under so that each child it forks reads
    the wall clock its own environment's `FAKETIME` says (the module doc): libfaketime's preload as
    `clock_env` builds it, a shift of 0, the monotonic clock left alone, the cache off. None where a clock
    fault cannot move a black-box worker's clock (`unsupported`)."""
    lib = faketime_library()
    preload = None if lib is None else _preload(lib)
    if preload is None:
        return None
    return {**_faketime_vars(0.0, " ".join(p for p in (preload, existing_preload) if p)), NO_CACHE_VAR: "1"}


def clock_env(offset: float, black_box: bool, existing_preload: str | None = None) -> dict[str, str]:
    """The variables that move an incarnation's clock by `offset` seconds (nothing for 0)."""
    if not offset:
        return {}
    if not black_box:
        return {OFFSET_VAR: repr(float(offset))}
    lib = faketime_library()
    preload = None if lib is None else _preload(lib)
    if preload is None:
        return {}
    return _faketime_vars(offset, " ".join(p for p in (preload, existing_preload) if p))
    # not OFFSET_VAR: a --worker-cmd that runs the reference runtime would move its clock twice
