"""Launchers start worker incarnations and report how each one ends: the `Incarnation` they give back and
the `Launcher` interface both kinds implement.

`ForkLauncher` (harness/env/fork_launcher.py) asks one of its fork servers (harness/env/forkserver.py, one
per hash seed, used in turn by the incarnations of a run) that have already imported the agent;
`ExecLauncher` (harness/env/exec_launcher.py) starts a fresh interpreter (`--spawn exec`) or any command
(`--worker-cmd`). Both give back an `Incarnation` whose `ended` event is set when the process is gone, with
its exit code or signal, and whose `stopped` event follows SIGSTOP/SIGCONT as the kernel reports them.

Process groups. Every incarnation is the leader of its own process group (pgid = its pid), so whatever it
starts (a forked child, a shell's `sleep &`) is in that group too. `Incarnation.send` delivers SIGKILL,
SIGSTOP and SIGCONT to the whole group: a killed or frozen worker takes its helpers with it, as a killed or
frozen container does. SIGTERM goes to the leader only, as Kubernetes and `docker stop` deliver it to a
container's PID 1: forwarding it is the worker's job, and the SIGKILL that ends the grace period then takes
the whole group, like the kubelet's final kill. `Launcher.close()` kills every group and every straggler.
What an incarnation left, escapees and adopted orphans included, is found in the process table
(harness/env/proctable.py: `leftovers`, `kill_all`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from killpoint.env import proctable
from killpoint.env.proctable import TAG_VAR, kill_all, leftovers, surely_gone
from killpoint.env.procutil import describe

__all__ = ["GROUP_SIGNALS", "HASH_SEEDS", "TAG_VAR", "ExitCallback", "Incarnation", "IncarnationSeeds", "Launcher",
           "kill_all", "leftovers", "surely_gone"]

GROUP_SIGNALS = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT})
"""The signals `Incarnation.send` delivers to the whole process group by default (see the module doc)."""


@dataclass
class Incarnation:
    """One worker process, leader of its own process group.

    When it ends, `exit_code`/`signal` and `exited` are set first, then the launcher's `on_exit` runs
    (the history records the end), and only then is `ended` set: whoever waits on `ended` finds the end
    already recorded, and whoever `on_exit` wakes already sees `alive()` False.

    `pgid` is its process group (0: it has none of its own, signals go to `pid` only), `tag` the value of
    `TAG_VAR` in its environment, `since` a time (epoch seconds) before it was started, `leader_ctime`
    the leader's create time (None if it was gone before it could be read), `ended_at` when its end was
    reported, `cpu` the leader's own user + system CPU seconds (forked incarnations: the fork server reads
    them when it reaps the leader; else None), and `adopter` (fork server only) lists the orphans the fork server adopted: those created
    while this incarnation lived are counted as its own.
    """

    inc: str
    run_id: str
    role: str
    pid: int = 0
    log: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    exited: bool = False
    ended: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    continued: threading.Event = field(default_factory=threading.Event)
    pgid: int = 0
    tag: str = ""
    since: float = 0.0
    leader_ctime: float | None = None
    ended_at: float | None = None
    cpu: float | None = None
    adopter: Callable[[], list[psutil.Process]] | None = field(default=None, repr=False, compare=False)
    termed: bool = False
    """True once a SIGTERM was delivered to it (`send`): it is draining, and a deploy sends no second one."""

    def alive(self) -> bool:
        return not self.exited

    def end_fields(self) -> dict[str, Any]:
        """What its `inc.end` event records: its id, how it ended, and its CPU when known."""
        return {"inc": self.inc, "exit_code": self.exit_code, "signal": self.signal,
                **({"cpu": self.cpu} if self.cpu is not None else {})}

    def send(self, sig: int, group: bool | None = None) -> bool:
        """Signal the incarnation if its leader still runs; False if it was already gone.

        `group` None: SIGKILL, SIGSTOP and SIGCONT go to the whole process group, any other signal (SIGTERM)
        to the leader only; True/False force either."""
        if self.exited:
            return False
        if group is None:
            group = sig in GROUP_SIGNALS
        try:
            if group and self.pgid:
                os.killpg(self.pgid, sig)
            else:
                os.kill(self.pid, sig)
            self.termed = self.termed or sig == signal.SIGTERM
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def leftovers(self) -> list[str]:
        """Every process of this incarnation still alive (zombies excluded), as `pid N (command line)`:
        its process group (the leader too, if it still runs), its descendants, and the escapees that carry
        its tag (harness/env/proctable.py). Empty once everything it started has ended."""
        return [describe(p) for p in proctable.members([self]).get(id(self), [])]

    def kill_all(self, timeout: float = 10.0) -> list[str]:
        """SIGKILL everything `leftovers()` finds (the group at once, then each straggler) and wait until
        it is gone; return what was killed (as `leftovers()` words it)."""
        return proctable.kill_all([self], timeout)


ExitCallback = Callable[[Incarnation], None]


class Launcher:
    """Interface: spawn(inc, run_id, role, argv, env, log) -> Incarnation; close() ends every child.

    `on_start(incarnation)` runs as soon as the pid is known, before anything about the process's end
    can be reported; `on_exit(incarnation)` runs once it has ended (see `Incarnation`).
    """

    on_start: ExitCallback | None = None
    on_exit: ExitCallback | None = None

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None) -> Incarnation:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def release(self, run_id: str) -> None:
        """Stop holding `run_id`'s ended incarnations: its evidence was read, and what they left was killed
        then (`run.evidence.gather`), so `close` has nothing of theirs to clean up. A long session's launcher
        then holds its live incarnations, not every one it ever started. Live ones are kept."""

    @staticmethod
    def _new(inc: str, run_id: str, role: str, log: str | None) -> Incarnation:
        """An incarnation about to be started: a fresh tag, and `since` taken now, before its process exists."""
        return Incarnation(inc=inc, run_id=run_id, role=role, log=log, tag=uuid.uuid4().hex, since=time.time())

    @staticmethod
    def _identify(incarnation: Incarnation) -> None:
        """Record the new leader's create time (to tell it from a later process that reuses its pid)."""
        incarnation.pgid = incarnation.pid
        with contextlib.suppress(psutil.Error):
            incarnation.leader_ctime = psutil.Process(incarnation.pid).create_time()

    def _started(self, incarnation: Incarnation) -> None:
        if self.on_start:
            self.on_start(incarnation)

    @staticmethod
    def _stop_state(incarnation: Incarnation, stopped: bool) -> None:
        """The kernel reported the incarnation stopped (SIGSTOP: `stopped` True) or continued (SIGCONT)."""
        if stopped:
            incarnation.continued.clear()
            incarnation.stopped.set()
        else:
            incarnation.stopped.clear()
            incarnation.continued.set()

    def _finish(self, incarnation: Incarnation, code: int | None, sig: int | None) -> None:
        incarnation.exit_code, incarnation.signal = code, sig
        incarnation.ended_at = time.time()
        incarnation.exited = True
        incarnation.stopped.clear()
        try:
            if self.on_exit:
                self.on_exit(incarnation)
        finally:
            incarnation.ended.set()


HASH_SEEDS: tuple[int, ...] = (2029, 7411)
"""The `PYTHONHASHSEED`s incarnations are started with, in turn: the n-th incarnation of a run gets
`HASH_SEEDS[n % len(HASH_SEEDS)]`. Fixed values (same schedule, same verdict on any machine) that differ from
one incarnation of a run to the next, as two real restarts differ: a key built with `hash()` changes on
resume (never 0, which would turn hash randomisation off)."""


class IncarnationSeeds:
    """Hands out the hash seed of each new incarnation of a run (see `HASH_SEEDS`).

    1. `next(run_id)` counts the incarnations asked for `run_id` so far (0 for the first).
    2. It returns that count modulo the number of seeds: an index into `HASH_SEEDS` (the fork server to use,
       or the seed an exec'd worker is given), so a resumed incarnation never shares the hash seed of the
       one it replaces, and the first incarnation of every run (the crash-free run's too) gets the first.
    Thread-safe.
    """

    def __init__(self, count: int | None = None) -> None:
        self._count = len(HASH_SEEDS) if count is None else count
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def next(self, run_id: str) -> int:
        with self._lock:
            n = self._seen.get(run_id, 0)
            self._seen[run_id] = n + 1
        return n % self._count

    def forget(self, run_id: str) -> None:
        """Stop counting `run_id` (its run ended and was released: `Launcher.release`), so a long session
        holds a count per live run, not one per run it ever started."""
        with self._lock:
            self._seen.pop(run_id, None)
