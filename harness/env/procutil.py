"""Small process helpers shared by the launchers: parent-death signals, the child subreaper, exit-status
decoding, waiting for processes that are not our children, and one-line descriptions of processes."""

from __future__ import annotations

import ctypes
import os
import queue
import select
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import psutil

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, int(arg), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25
_HUGE = 1 << 21
"""Linux's transparent huge page size on x86-64 and arm64 (with 4 KB base pages)."""


def huge_heap(maps: str = "/proc/self/maps") -> int:
    """Back this process's private anonymous memory with 2 MB pages where the kernel lets it
    (`MADV_COLLAPSE`, Linux 6.1 or later, transparent huge pages not `never`); the bytes now backed so,
    0 where it cannot (nothing changes then).

    For a process that forks many children from a large preloaded heap (the fork server, ~80 MB of the SDK's
    objects): a fork copies one page-table entry per 2 MB instead of 512, and a child's exit frees them as
    fast. A child's write still copies 4 KB, not 2 MB: the kernel splits a shared huge page on a write
    fault. Measured on the 2-core machine: a fork and an immediate exit 6.7 -> 3.0 ms of CPU
    (docs/performance.md)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open(maps) as f:
            lines = f.read().splitlines()
    except (OSError, AttributeError):
        return 0
    done = 0
    for line in lines:
        fields = line.split()
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue  # only private, writable, anonymous memory (the heap and mmap'd arenas), no stack
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        lo, hi = (lo + _HUGE - 1) & ~(_HUGE - 1), hi & ~(_HUGE - 1)
        if hi <= lo:
            continue
        if libc.madvise(lo, hi - lo, _MADV_HUGEPAGE) == 0 and libc.madvise(lo, hi - lo, _MADV_COLLAPSE) == 0:
            done += hi - lo
    return done


def pgid(pid: int) -> int:
    """`pid`'s process group, or -1 if it is gone (or not ours to ask about)."""
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Ask Linux to send `sig` to this process when the thread that forked it dies (no-op elsewhere).

    This is what makes a SIGKILLed harness take its fork server and workers with it. It is not inherited
    by the processes this one forks: grandchildren are found and killed through the process group instead.
    With `parent` (the forking process's pid, read before the fork): if that process died between the fork
    and this request, no signal will ever come, so this process ends here (`os._exit(1)`: a handler the
    parent installed cannot catch it before an exec).

    An ignored `sig` is first set back to its default: an ignored signal is dropped when sent, and exec keeps
    it ignored. A shell starts a background job (`cmd &`, a CI step's) with SIGINT and SIGQUIT ignored, so a
    postmaster (whose death signal is SIGQUIT) exec'd from such a harness, if the harness died before the
    server installed its own handler, never got it and outlived the harness.
    """
    if sig not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(sig) == signal.SIG_IGN:
        signal.signal(sig, signal.SIG_DFL)
    _prctl(_PR_SET_PDEATHSIG, sig)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def dying_with_us(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A `preexec_fn` for `subprocess.Popen`: the child gets `sig` when the thread that started it dies, and
    ends at once if this process died before the child could ask (`die_with_parent`'s `parent`)."""
    parent = os.getpid()
    return lambda: die_with_parent(sig, parent)

def on_a_lasting_thread() -> bool:
    """True on a thread that lives as long as this process: the main one, or `on_lasting_thread`'s."""
    return threading.current_thread() in (threading.main_thread(), _Spawner.thread)


def on_lasting_thread(fn: Callable[[], T]) -> T:
    """`fn()` (its value, or its exception raised here) run on a thread that lives as long as this process:
    this one if it is the main thread, else one daemon thread started on first use. A child's parent-death
    signal (`die_with_parent`) follows the thread that forked it, and a trial's thread ends long before the
    session: what must die with the session is started here."""
    if threading.current_thread() is threading.main_thread():
        return fn()
    return _Spawner.run(fn)


class _Spawner:
    """One daemon thread, started on first use, that runs the forks asked of it for the process's lifetime."""

    thread: threading.Thread | None = None
    _jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
    _lock = threading.Lock()

    @classmethod
    def run(cls, fn: Callable[[], T]) -> T:
        """``fn()`` run on the spawner thread; its result, or its exception raised here."""
        with cls._lock:
            if cls.thread is None:
                cls.thread = threading.Thread(target=cls._serve, name="killpoint-spawner", daemon=True)
                cls.thread.start()
        done: Future[T] = Future()
        cls._jobs.put((fn, done))
        return done.result()

    @classmethod
    def _serve(cls) -> None:
        while True:
            fn, done = cls._jobs.get()
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                done.set_exception(exc)


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux `PR_SET_CHILD_SUBREAPER`) instead of init.

    A grandchild that left its incarnation's process group (`setsid`) and whose parent died is then still
    this process's descendant, so it can be found and killed. False where the kernel does not offer it."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def decode_status(status: int) -> tuple[int | None, int | None]:
    """(exit_code, signal) from a waitpid status; exactly one is not None."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status), None


def gone(proc: psutil.Process) -> bool:
    """True once `proc` has ended (a zombie has ended: it only waits for its parent to read its status)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process of `procs` has ended (or is a zombie); return those still alive at the
    deadline. Wakes on the exit itself through a pidfd (Linux 5.3+), and polls only where there is none."""
    deadline = time.monotonic() + timeout
    left: list[psutil.Process] = []
    for proc in procs:
        if gone(proc):
            continue
        fd = None
        try:
            fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pass
        try:
            if fd is not None and proc.is_running():  # the pidfd is of this very process, not a reused pid
                select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            else:
                interval = 0.002
                while not gone(proc) and time.monotonic() < deadline:
                    time.sleep(interval)
                    interval = min(interval * 1.5, 0.05)
        finally:
            if fd is not None:
                os.close(fd)
        if not gone(proc):
            left.append(proc)
    return left


def describe(proc: psutil.Process) -> str:
    """`pid N (command line)` for reports; the name where the command line cannot be read."""
    try:
        cmd = " ".join(proc.cmdline()) or proc.name()
    except psutil.Error:
        cmd = "?"
    if len(cmd) > 160:
        cmd = cmd[:157] + "..."
    return f"pid {proc.pid} ({cmd})"


def cpu_wait(pid: int | None) -> float | None:
    """Seconds the threads of process `pid` have spent runnable but waiting for a CPU, since each started
    (the kernel's `run_delay`, the second field of /proc/PID/task/TID/schedstat); None where it cannot be
    read (the process is gone, or the kernel keeps no schedstats). Two readings bracket how long a busy
    machine kept the process from running."""
    if pid is None:
        return None
    total, seen = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
                seen = True
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9 if seen else None


def cpu_wait_since(pid: int | None, before: float | None) -> float | None:
    """Seconds process `pid` waited for a CPU since `cpu_wait(pid)` read `before` (rounded to ms); None when
    either reading is missing."""
    after = cpu_wait(pid)
    return None if before is None or after is None else round(after - before, 3)

