"""The launcher of a black-box Python worker (`--worker-cmd 'python x.py {run_id}'`): incarnations forked from
fork servers that preloaded the worker's libraries, and exec'd whenever a fork could not be the same as a
fresh interpreter (`PythonForkLauncher`, below, says when).

Which command qualifies and what is preloaded: harness/env/pycommand.py. What the servers check of their
preload and how a child becomes the worker: harness/env/pymain.py. Why it is safe: every incarnation gets
only fake credentials and the fakes' URLs (harness/env/worker_env.py), the same for the whole session but
for the run-specific ones, which no preloaded module may have read at import (`volatile_vars`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from killpoint.env import credentials, egress, worker_clock
from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fakes_env import service_env, worker_pythonpath
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import HASH_SEEDS, Incarnation, IncarnationSeeds, Launcher
from killpoint.env.proctable import TAG_VAR
from killpoint.env.procutil import on_lasting_thread
from killpoint.env.pycommand import PythonCommand
from killpoint.errors import EnvironmentProblem

if TYPE_CHECKING:
    from killpoint.fake_services import Services

STARTUP_PREFIXES = ("PYTHON", "LD_")
"""Variables read when an interpreter starts or loads a library (`PYTHONPATH`, `LD_PRELOAD`: a clock
fault's libfaketime): a fork inherits the servers' instead, so an incarnation whose value differs is exec'd.
`PYTHONHASHSEED` is matched by choosing the server (one per seed); a clock fault's `LD_PRELOAD` by forking
from the clock servers (`PythonForkLauncher`, 3.)."""

SAY = "worker-cmd:"
"""How the launcher's lines in the progress output start."""


def volatile_vars(services: Services) -> list[str]:
    """The variables that differ from one incarnation (or run) to the next, besides the `KILLPOINT_*` the
    server lacks: the run's service URLs (`service_env`'s with a run slot), its database URL and libpq
    names, the clock fault's preload, the tag."""
    urls = [k for k, v in service_env(services, None).items() if "{run_id}" in v]
    return sorted({*urls, "DATABASE_URL", "PGAPPNAME", "PGOPTIONS", "LD_PRELOAD", worker_clock.SHIFT_VAR,
                   "FAKETIME_DONT_FAKE_MONOTONIC", worker_clock.NO_CACHE_VAR, worker_clock.OFFSET_VAR, TAG_VAR})


def server_env(base: Mapping[str, str], services: Services, volatile: list[str], egress_allowed: str) -> dict[str, str]:
    """The environment the fork servers import the worker's libraries under: the session's part of an
    incarnation's (the shell's without credentials, the fake keys, `NO_PROXY`, the worker's `PYTHONPATH`,
    the egress guard's hosts), none of `volatile`."""
    out = {k: v for k, v in {**credentials.scrubbed(base), **service_env(services, None)}.items() if k not in volatile}
    out["PYTHONPATH"] = worker_pythonpath(out.get("PYTHONPATH"))
    out[egress.ALLOW_VAR] = egress_allowed
    return out



def _names(modules: list[str], shown: int = 6) -> str:
    """`modules` named, the first `shown` of them, and how many more."""
    more = len(modules) - shown
    return ", ".join(modules[:shown]) + (f" and {more} more" if more > 0 else "")


@dataclass
class _Pool:
    """Fork servers (one per hash seed) started under `env`, and what their preload read at import."""

    forks: ForkLauncher
    env: dict[str, str]
    reads: dict[str, str | None] = field(default_factory=dict)
    stood_in: set[str] = field(default_factory=set)


class PythonForkLauncher(Launcher):
    """Incarnations of `cmd` forked from fork servers (one per hash seed, no standby) that preloaded
    `modules`, each exec'd instead (by an `ExecLauncher` of `cmd.guarded_argv()`: behind the egress guard too)
    when forking it would differ:

    1. At `ready()`: if no server could start, none preloaded anything, or a preload left a thread running
       or a descriptor open (harness/env/pymain.py), every incarnation is exec'd, and `say` tells why once.
       Else `say` names what was preloaded and what was not, and why.
    2. At each spawn: an incarnation whose environment differs from its servers' in a variable of
       `STARTUP_PREFIXES` or in one a preloaded module read at import, or that lacks a per-run variable a
       preloaded module read at import (each fork gets its own value: harness/env/stand_ins.py), is exec'd;
       `say` tells why, once per reason.
    3. An incarnation under a clock fault's shift (`FAKETIME` in its environment: harness/env/worker_clock.py)
       is forked from a second pair of servers, the clock servers, started under libfaketime with a shift
       of 0 (`worker_clock.fork_server_env`) at the first such spawn, which waits for their preload; the
       child reads its own `FAKETIME`. Where they cannot start or preload as 1. requires, incarnations under
       a shift are exec'd, and `say` tells why once. The others never run under libfaketime.
    4. Either way the n-th incarnation of a run gets `HASH_SEEDS[n % 2]` (one `IncarnationSeeds` for both).
    """

    def __init__(self, cmd: PythonCommand, modules: list[str], env: dict[str, str],
                 volatile: list[str], say: Callable[[str], None] | None = None) -> None:
        self._cmd = cmd
        self._env = env
        self._say = say
        self._said: set[str] = set()
        self._lock = threading.Lock()
        self._seeds = IncarnationSeeds()
        self._exec = ExecLauncher(cmd.guarded_argv())  # exec'd incarnations are guarded as forked ones are
        self._exec.on_start, self._exec.on_exit = self._relay_start, self._relay_exit
        self._spec = {**cmd.spec(), "modules": modules, "volatile": volatile}
        self._clock_lock = threading.Lock()  # one start of the clock servers, whichever run asks first
        self._clock: _Pool | str | None = None  # the clock servers, why there are none, or None: not asked yet
        self._pool: _Pool | None = None
        try:
            self._pool = self._start(env)
        except OSError as exc:
            self._tell(f"every incarnation exec'd: the fork servers could not start ({exc})")

    @property
    def forking(self) -> bool:
        """True while incarnations are forked (after `ready()`, unless it fell back to exec)."""
        return self._pool is not None

    def _start(self, env: dict[str, str]) -> _Pool:
        """Fork servers started under `env` (OSError if they cannot be), not waited for."""
        forks = ForkLauncher([], env=env, wait=False, standby=False, black_box=self._spec)
        forks.on_start, forks.on_exit, forks.on_learned = self._relay_start, self._relay_exit, self._learned
        return _Pool(forks, env)

    def _check(self, pool: _Pool) -> str | None:
        """Wait for `pool`'s preload; why its servers cannot fork (they are then closed), or None (and
        their `reads` are recorded)."""
        try:
            pool.forks.ready()
        except EnvironmentProblem as exc:
            return exc.message
        reports = pool.forks.reports
        unsafe = next((r["unsafe"] for r in reports if r.get("unsafe")), None)
        if unsafe or not reports[0].get("preloaded"):
            pool.forks.close()
            return f"{unsafe or 'nothing the worker imports at its top level is a library to preload'} " \
                   "(see --worker-preload)"
        for report in reports:
            pool.reads.update(report.get("reads", {}))
            pool.stood_in.update(report.get("stood_in", {}))
        return None

    def ready(self) -> None:
        """Wait for the servers' preload and decide (1. of the class doc)."""
        if self._pool is None:
            return
        why = self._check(self._pool)
        if why is not None:
            self._pool = None
            self._tell(f"every incarnation exec'd: {why}")
            return
        report = self._pool.forks.reports[0]
        stood = report.get("stood_in", {})
        self._tell(f"incarnations forked from servers that preloaded {', '.join(report.get('preloaded', []))}"
                   + "".join(f"; {m} not preloaded: {why}" for m, why in report.get("skipped", {}).items())
                   + "".join(f"; {var}, read at import, is each incarnation's own"
                             + (f" in {', '.join(places)}" if places else "") for var, places in sorted(stood.items())))

    def _clock_pool(self) -> _Pool | str:
        """The clock servers (3. of the class doc), started and checked on the first call; or why there are
        none."""
        with self._clock_lock:
            if self._clock is None:
                self._clock = self._start_clock()
            return self._clock

    def _start_clock(self) -> _Pool | str:
        head = "incarnations under a clock fault's shift are exec'd: "
        extra = worker_clock.fork_server_env(self._env.get("LD_PRELOAD"))
        if extra is None:
            return head + "libfaketime cannot move a clock here"
        try:
            # Started where they die with the session, not with the run's thread that asked first (a fork
            # server's parent-death signal follows the thread that started it).
            pool = on_lasting_thread(lambda: self._start({**self._env, **extra}))
        except Exception as exc:  # noqa: BLE001 - any failure to start is said once, and incarnations are exec'd
            return head + f"the clock servers could not start ({exc})"
        why = self._check(pool)
        if why is not None:
            return head + f"the clock servers (under libfaketime) cannot fork: {why}"
        self._tell("incarnations under a clock fault's shift forked from servers under libfaketime")
        return pool

    def _learned(self, msg: dict) -> None:
        """A server's preload grew (harness/env/preload_learning.py): say what it took, and what it refused."""
        took, refused = msg.get("modules", []), msg.get("refused", {})
        parts = [f"also preloaded, as incarnations imported them: {_names(took)}"] if took else []
        parts += [f"{m} not preloaded: {why}" for m, why in sorted(refused.items())[:3]]
        if len(refused) > 3:
            parts.append(f"{len(refused) - 3} more not preloaded")
        if parts:
            self._tell("; ".join(parts))

    def _tell(self, line: str) -> None:
        with self._lock:
            if line in self._said:
                return
            self._said.add(line)
        if self._say is not None:
            self._say(f"{SAY} {line}")

    def refusal(self, env: Mapping[str, str], pool: _Pool | None = None) -> str | None:
        """Why an incarnation of environment `env` cannot be forked from `pool` (the servers of 1. by default;
        2. of the class doc), or None."""
        pool = pool or self._pool
        server = pool.env if pool is not None else self._env
        names = {k for k in (*env, *server) if k.startswith(STARTUP_PREFIXES) and k != "PYTHONHASHSEED"}
        for name in sorted(names):
            if env.get(name) != server.get(name):
                return f"incarnations whose {name} differs from the fork servers' are exec'd"
        for name, seen in sorted((pool.reads if pool is not None else {}).items()):
            if env.get(name) != seen and name != "PYTHONHASHSEED":
                return f"incarnations whose {name} differs are exec'd (a preloaded module read it at import)"
        for name in sorted(pool.stood_in if pool is not None else ()):
            if not env.get(name):
                return f"incarnations without {name} are exec'd (a preloaded module read it at import)"
        return None

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None) -> Incarnation:
        index = self._seeds.next(run_id)
        pool: _Pool | str | None = self._pool
        if pool is not None and worker_clock.SHIFT_VAR in env:
            pool = self._clock_pool()
        why = pool if isinstance(pool, str) else self.refusal(env, pool) if pool is not None else None
        if pool is not None and why is None:
            assert isinstance(pool, _Pool)
            seeded = {**env, "PYTHONHASHSEED": str(HASH_SEEDS[index])}  # in its environment too, as when exec'd
            return pool.forks.spawn(inc, run_id, role, self._cmd.argv(run_id), seeded, log, seed_index=index)
        if why is not None:
            self._tell(why)
        return self._exec.spawn(inc, run_id, role, argv, env, log, seed_index=index)

    def _relay_start(self, incarnation: Incarnation) -> None:
        self._started(incarnation)

    def _relay_exit(self, incarnation: Incarnation) -> None:
        if self.on_exit:
            self.on_exit(incarnation)

    def _pools(self) -> list[_Pool]:
        """The servers in use (the clock servers once started: read without waiting for their start)."""
        return [p for p in (self._pool, self._clock) if isinstance(p, _Pool)]

    def died(self) -> str | None:
        """How a fork server died while in use (`killpoint.env.vitals`), or None."""
        return next((why for pool in self._pools() if (why := pool.forks.died())), None)

    def release(self, run_id: str) -> None:
        for pool in self._pools():
            pool.forks.release(run_id)
        self._exec.release(run_id)
        self._seeds.forget(run_id)

    def close(self) -> None:
        with self._clock_lock:
            self._clock = self._clock or "closed"  # none started after this (a start under way ends first)
        try:
            for pool in self._pools():
                pool.forks.close()
        finally:
            self._exec.close()
