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
from typing import TYPE_CHECKING

from killpoint.env import credentials, egress
from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fakes_env import service_env, worker_pythonpath
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import HASH_SEEDS, Incarnation, IncarnationSeeds, Launcher
from killpoint.env.proctable import TAG_VAR
from killpoint.env.pycommand import PythonCommand
from killpoint.env.worker_clock import OFFSET_VAR
from killpoint.errors import EnvironmentProblem

if TYPE_CHECKING:
    from killpoint.fake_services import Services

STARTUP_PREFIXES = ("PYTHON", "LD_")
"""Variables read when an interpreter starts or loads a library (`PYTHONPATH`, `LD_PRELOAD`: a clock
fault's libfaketime): a fork inherits the servers' instead, so an incarnation whose value differs is exec'd.
`PYTHONHASHSEED` is matched by choosing the server (one per seed)."""

SAY = "worker-cmd:"
"""How the launcher's lines in the progress output start."""


def volatile_vars(services: Services) -> list[str]:
    """The variables that differ from one incarnation (or run) to the next, besides the `KILLPOINT_*` the
    server lacks: the run's service URLs (`service_env`'s with a run slot), its database URL and libpq
    names, the clock fault's preload, the tag."""
    urls = [k for k, v in service_env(services, None).items() if "{run_id}" in v]
    return sorted({*urls, "DATABASE_URL", "PGAPPNAME", "PGOPTIONS", "LD_PRELOAD", "FAKETIME",
                   "FAKETIME_DONT_FAKE_MONOTONIC", OFFSET_VAR, TAG_VAR})


def server_env(base: Mapping[str, str], services: Services, volatile: list[str], egress_allowed: str) -> dict[str, str]:
    """The environment the fork servers import the worker's libraries under: the session's part of an
    incarnation's (the shell's without credentials, the fake keys, `NO_PROXY`, the worker's `PYTHONPATH`,
    the egress guard's hosts), none of `volatile`."""
    out = {k: v for k, v in {**credentials.scrubbed(base), **service_env(services, None)}.items() if k not in volatile}
    out["PYTHONPATH"] = worker_pythonpath(out.get("PYTHONPATH"))
    out[egress.ALLOW_VAR] = egress_allowed
    return out



class PythonForkLauncher(Launcher):
    """Incarnations of `cmd` forked from fork servers (one per hash seed, no standby) that preloaded
    `modules`, each exec'd instead (by an `ExecLauncher` of `cmd.guarded_argv()`: behind the egress guard too)
    when forking it would differ:

    1. At `ready()`: if no server could start, none preloaded anything, or a preload left a thread running
       or a descriptor open (harness/env/pymain.py), every incarnation is exec'd, and `say` tells why once.
       Else `say` names what was preloaded and what was not, and why.
    2. At each spawn: an incarnation whose environment differs from the servers' in a variable of
       `STARTUP_PREFIXES` (a clock fault's `LD_PRELOAD`) or in one a preloaded module read at import is
       exec'd; `say` tells why, once per reason.
    3. Either way the n-th incarnation of a run gets `HASH_SEEDS[n % 2]` (one `IncarnationSeeds` for both).
    """

    def __init__(self, cmd: PythonCommand, modules: list[str], env: dict[str, str],
                 volatile: list[str], say: Callable[[str], None] | None = None) -> None:
        self._cmd = cmd
        self._env = env
        self._say = say
        self._said: set[str] = set()
        self._lock = threading.Lock()
        self._seeds = IncarnationSeeds()
        self._reads: dict[str, str | None] = {}
        self._exec = ExecLauncher(cmd.guarded_argv())  # exec'd incarnations are guarded as forked ones are
        self._exec.on_start, self._exec.on_exit = self._relay_start, self._relay_exit
        spec = {**cmd.spec(), "modules": modules, "volatile": volatile}
        self._forks: ForkLauncher | None = None
        try:
            self._forks = ForkLauncher([], env=env, wait=False, standby=False, black_box=spec)
        except OSError as exc:
            self._tell(f"every incarnation exec'd: the fork servers could not start ({exc})")
        if self._forks is not None:
            self._forks.on_start, self._forks.on_exit = self._relay_start, self._relay_exit

    @property
    def forking(self) -> bool:
        """True while incarnations are forked (after `ready()`, unless it fell back to exec)."""
        return self._forks is not None

    def ready(self) -> None:
        """Wait for the servers' preload and decide (1. of the class doc)."""
        if self._forks is None:
            return
        try:
            self._forks.ready()
        except EnvironmentProblem as exc:
            self._forks = None
            self._tell(f"every incarnation exec'd: {exc.message}")
            return
        reports = self._forks.reports
        unsafe = next((r["unsafe"] for r in reports if r.get("unsafe")), None)
        preloaded = reports[0].get("preloaded", [])
        if unsafe or not preloaded:
            self._forks.close()
            self._forks = None
            why = unsafe or "nothing the worker imports at its top level is a library to preload"
            self._tell(f"every incarnation exec'd: {why} (see --worker-preload)")
            return
        for report in reports:
            self._reads.update(report.get("reads", {}))
        skipped = reports[0].get("skipped", {})
        self._tell(f"incarnations forked from servers that preloaded {', '.join(preloaded)}"
                   + "".join(f"; {m} not preloaded: {why}" for m, why in skipped.items()))

    def _tell(self, line: str) -> None:
        with self._lock:
            if line in self._said:
                return
            self._said.add(line)
        if self._say is not None:
            self._say(f"{SAY} {line}")

    def refusal(self, env: Mapping[str, str]) -> str | None:
        """Why an incarnation of environment `env` cannot be forked (2. of the class doc), or None."""
        names = {k for k in (*env, *self._env) if k.startswith(STARTUP_PREFIXES) and k != "PYTHONHASHSEED"}
        for name in sorted(names):
            if env.get(name) != self._env.get(name):
                hint = " (a clock fault's libfaketime acts only on a program it starts)" if name == "LD_PRELOAD" else ""
                return f"incarnations whose {name} differs from the fork servers' are exec'd{hint}"
        for name, seen in sorted(self._reads.items()):
            if env.get(name) != seen and name != "PYTHONHASHSEED":
                return f"incarnations whose {name} differs are exec'd (a preloaded module read it at import)"
        return None

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None) -> Incarnation:
        index = self._seeds.next(run_id)
        forks = self._forks
        why = self.refusal(env) if forks is not None else None
        if forks is not None and why is None:
            seeded = {**env, "PYTHONHASHSEED": str(HASH_SEEDS[index])}  # in its environment too, as when exec'd
            return forks.spawn(inc, run_id, role, self._cmd.argv(run_id), seeded, log, seed_index=index)
        if why is not None:
            self._tell(why)
        return self._exec.spawn(inc, run_id, role, argv, env, log, seed_index=index)

    def _relay_start(self, incarnation: Incarnation) -> None:
        self._started(incarnation)

    def _relay_exit(self, incarnation: Incarnation) -> None:
        if self.on_exit:
            self.on_exit(incarnation)

    def died(self) -> str | None:
        """How a fork server died while in use (`killpoint.env.vitals`), or None."""
        return self._forks.died() if self._forks is not None else None

    def release(self, run_id: str) -> None:
        if self._forks is not None:
            self._forks.release(run_id)
        self._exec.release(run_id)
        self._seeds.forget(run_id)

    def close(self) -> None:
        try:
            if self._forks is not None:
                self._forks.close()
        finally:
            self._exec.close()
