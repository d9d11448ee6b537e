"""Signals to a postmaster and its children, and the kernel objects a killed server leaves behind.

``stop_postmaster`` is the one way killpoint ends a server it owns: SIGQUIT (Postgres "immediate
shutdown": children are told to quit, no checkpoint, shared memory released), then SIGKILL to the whole
tree if it lingers, then the SysV shared-memory segment named in ``postmaster.pid`` is removed if a
SIGKILL left it. ``die_with_parent`` makes a server quit by itself when the process that started it dies.

The kernel sends that signal when the *thread* that forked the server ends, not the process. So
``popen_dying_with_us`` forks from the main thread, or from any other through one daemon thread that lives
as long as the process (``_Spawner``): a server restarted by a ``db-crash`` fault, from a trial's thread,
ends with a SIGKILLed harness like the first one, and never with the short-lived thread that restarted it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from killpoint.env import procutil

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
IPC_RMID = 0


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Reap those of `procs` that are our own children and have exited, then wait until every one is gone or
    a zombie (`procutil.wait_gone`: orphans may wait long for init to reap them). Those still alive at the
    deadline."""
    for p in procs:
        try:
            if p.ppid() == os.getpid():
                p.wait(timeout=0)  # reaps if exited
        except (psutil.TimeoutExpired, psutil.NoSuchProcess, ChildProcessError):
            pass
    return procutil.wait_gone(procs, timeout)


def kill_tree(proc: psutil.Process, sig: int = signal.SIGKILL, timeout: float = 10.0) -> None:
    """Send ``sig`` to ``proc`` and all its descendants at once, then wait up to ``timeout`` for them."""
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.NoSuchProcess:
            pass
    wait_gone(procs, timeout)


def shm_id(data_dir: Path) -> int | None:
    """The SysV shared-memory id recorded in ``postmaster.pid`` (line 7: key, id), if any."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        return int(lines[6].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def remove_shm(data_dir: Path) -> None:
    """Remove the server's SysV segment (after a SIGKILL nobody else would). No-op if already gone."""
    shmid = shm_id(data_dir)
    if shmid is not None:
        _LIBC.shmctl(ctypes.c_int(shmid), ctypes.c_int(IPC_RMID), None)


def stop_postmaster(proc: psutil.Process, data_dir: Path, grace: float = 10.0) -> None:
    """Immediate shutdown of ``proc`` (a postmaster); SIGKILL the tree after ``grace`` s. Leaves nothing running."""
    try:
        children = proc.children(recursive=True)
        proc.send_signal(signal.SIGQUIT)
    except psutil.NoSuchProcess:
        children = []
    alive = wait_gone([proc, *children], grace)
    if alive:
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        wait_gone(alive, 10.0)
        remove_shm(data_dir)


def die_with_parent(sig: int = signal.SIGQUIT) -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to send ``sig`` to the child when this thread dies, or ``None``.

    Only from the main thread: the kernel fires on the death of the *thread* that forked, so a server
    started from a short-lived thread would be shut down with it.
    """
    prctl = getattr(_LIBC, "prctl", None)  # Linux only
    if prctl is None or not procutil.on_a_lasting_thread():
        return None

    # `dying_with_us`: a server forked while this process was being killed ends at once (its request came
    # after the death, so no signal would: seen as a restarted postmaster outliving its harness).
    return procutil.dying_with_us(sig)


def popen_dying_with_us(args: list[str], sig: int = signal.SIGQUIT, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **kwargs)`` whose child gets ``sig`` when this process dies, from whichever
    thread it is called (see the module doc); without ``prctl`` (not Linux), a plain ``Popen``."""
    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(args, preexec_fn=die_with_parent(sig), **kwargs)  # noqa: PLW1509

    return procutil.on_lasting_thread(start)
