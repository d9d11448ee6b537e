"""Black-box Python workers of a test: a script importing libraries of the test's own, run through a
`PythonForkLauncher` (harness/env/pyfork_launcher.py) one incarnation at a time."""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.env import worker_clock
from killpoint.env.launcher import Incarnation
from killpoint.env.pycommand import PythonCommand, auto_preload, parse
from killpoint.env.pyfork_launcher import PythonForkLauncher

REPORT = """\
import atexit, json, os, sys
{imports}
def bye():
    print("atexit ran", flush=True)
atexit.register(bye)
def typed(x: int) -> None: ...
journal = open(os.environ["JOURNAL"], "a") if os.environ.get("JOURNAL") else None  # never closed: flushed at exit
if journal:
    journal.write(f"{{os.getpid()}} ran\\n")
print(json.dumps({{"annotations": "postponed" if isinstance(typed.__annotations__["x"], str) else "evaluated",
                  "cmdline": open("/proc/self/cmdline").read().replace("\\0", " ").split(),
                  "name": __name__, "argv": sys.argv, "path0": sys.path[0], "file": __file__,
                  "main": sys.modules["__main__"].__dict__ is globals(), "var": os.environ.get("INC_VAR"),
                  "lib": {lib}, "parent": os.getppid(), "hashseed": os.environ.get("PYTHONHASHSEED")}}))
sys.exit(3)
"""


class Workers:
    """A `PythonForkLauncher` of `app/worker.py` (which imports `lib/<libs>` from PYTHONPATH), its lines.
    `libs` maps module names to their source: a dotted name is a package's submodule (the package is
    `libs`' entry of its name), a name starting with `_` a module the others import; the worker imports
    the rest at its top level, and reports the expression `uses` as its `lib`. The script is in `script_in`
    (a folder of `root`: `lib/pkg` puts it beside a package's modules)."""

    def __init__(self, root: Path, libs: dict[str, str], uses: str = "None", volatile: tuple[str, ...] = (),
                 script_in: str = "app") -> None:
        for folder in ("app", "lib", "logs"):
            (root / folder).mkdir(exist_ok=True)
        for name, source in libs.items():
            path = root / "lib" / (name.replace(".", "/") + ".py")
            if any(other.startswith(name + ".") for other in libs):  # a package
                path = path.with_suffix("") / "__init__.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
        # `_name`: a dependency, `a.b`: a submodule, neither imported by the worker at its top level
        imports = "\n".join(f"import {name}" for name in libs if not name.startswith("_") and "." not in name)
        self.script = root / script_in / "worker.py"
        self.script.parent.mkdir(parents=True, exist_ok=True)
        self.script.write_text(REPORT.format(imports=imports, lib=uses))
        self.logs = root / "logs"
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "lib"), os.environ.get("PYTHONPATH", "")])}
        self.env.pop("PYTHONHASHSEED", None)
        self.said: list[str] = []
        worker_cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(self.script))} {{run_id}} x"
        cmd = parse(shlex.split(worker_cmd))
        assert isinstance(cmd, PythonCommand)
        self.launcher = PythonForkLauncher(cmd, auto_preload(cmd), self.env, list(volatile),
                                           self.said.append)
        self.launcher.ready()
        self.n = 0
        self.incs: list[Incarnation] = []
        self.servers = self.server_pids()

    def spawn(self, **extra: str) -> tuple[Incarnation, Path]:
        """Start the next incarnation with `extra` in its environment; it and its log."""
        self.n += 1
        log = self.logs / f"w{self.n}.log"
        inc = self.launcher.spawn(f"w{self.n}", "run-1", "worker", [], {**self.env, **extra}, str(log))
        self.incs.append(inc)
        return inc, log

    def run(self, **extra: str) -> tuple[dict, str, int | None, bool]:
        """One incarnation with `extra` in its environment, to its end: its report, whole log, exit code, and
        whether it was forked (its parent a fork server)."""
        inc, log = self.spawn(**extra)
        assert inc.ended.wait(60), "the worker did not end"
        text = log.read_text()
        report = json.loads(text.splitlines()[0])
        self.servers = self.server_pids()  # the clock servers too, once started
        return report, text, inc.exit_code, report.pop("parent") in self.servers

    def server_pids(self, clock: bool | None = None) -> list[int]:
        """The fork servers' pids (`clock`: only the clock servers', or only the others')."""
        pools = self.launcher._pools()  # noqa: SLF001
        return [pid for pool in pools for pid in pool.forks.server_pids
                if clock is None or (pool is not self.launcher._pool) == clock]  # noqa: SLF001

    def close(self) -> list[str]:
        """Close the launcher; what is left running of its incarnations and fork servers, and what libfaketime
        made in /dev/shm for any of them (nothing)."""
        self.launcher.close()
        left = [line for inc in self.incs for line in inc.leftovers()]
        made = [path for pid in [*self.servers, *(inc.pid for inc in self.incs)]
                for path in worker_clock.leftovers(pid) if os.path.exists(path)]
        return left + made + [f"fork server {pid}" for pid in self.servers
                              if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


@pytest.fixture(name="workers")
def workers_fixture() -> Iterator[list[Workers]]:
    """The `Workers` a test made; each is closed after it, and must leave nothing running."""
    made: list[Workers] = []
    yield made
    for w in made:
        assert not w.close()
