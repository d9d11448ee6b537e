"""A black-box fork server's preload, grown from what its first incarnations imported after it forked them.

A framework imports part of itself only when first used (Pydantic AI its price table, SQLAlchemy under DBOS
a dialect, LangChain its tracers): every forked incarnation pays those imports again (~30 ms of a Pydantic
AI DBOS incarnation). The server learns them from its incarnations and imports them between forks, under
the checks `pymain.preload` makes of its own list:

1. Each child forked while the server is learning (`arm`) reports, when it ends as an interpreter would
   (`report`, from `pymain.finish`: a killed one says nothing), the modules it imported that its server
   had not: one line per name, in import order, under a header line naming its pid, in writes of at most
   `PIPE_BUF` bytes (atomic: reports of children ending together do not mix), never blocking (a full pipe
   drops the report).
2. The server (`Learner.feed`) keeps the candidates: a module it lacks whose top-level package it has
   already imported, or of the standard library; never `__main__`, the worker's own code (a module found
   in its folder, by its own name or through its package's path: imported afresh by every incarnation, as
   in production) or one already refused.
3. It tries them in a forked probe first (`_probe`: a copy of the server at that moment, so an import there
   is the one the server would make; it stays in the server's process group, which is how the launcher
   tells it from an escaped worker process: `fork_launcher._ForkServer.adopted`), in the order the child imported them, and refuses a module whose
   import failed, started a thread, left a descriptor open, changed a signal's handler (the server's own
   would be replaced) or the environment (a child's is exactly the incarnation's), or looked up a variable
   that the preload did not read (`reads`: the launcher forks only incarnations that agree with the server
   on those) or that differs per run (`pymain.volatile`), or used (or kept anew) the value a preloaded module
   read of one (`stand_ins.intact`: each child binds only the globals judged at the preload). The probe stops at the first refusal; the server
   imports what it passed before it, exactly as the probe did, and a new probe tries the rest from there
   (`MAX_PROBES` in all per round: each import is tried once, imported once). Then the server freezes what
   that made out of the garbage collector's reach (as after the preload), and says
   `{"op": "learned", "modules": [...], "refused": {...}}`.
4. It learns from the reports of its first `LEARN_FROM` incarnations, then disarms: later children report
   nothing. The report pipe is drained, never closed (a child writing to a closed pipe could die of
   SIGPIPE under its own handler).

Not seen, as for the preload: a module that captures state the child's own code set before importing it
(a monkeypatch of its package), which the server's import would not see.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable

from killpoint.env import pymain, stand_ins
from killpoint.env.procutil import die_with_parent
from killpoint.env.pycommand import own

LEARN_FROM = 16
"""A server learns from this many incarnations' reports, then stops asking."""

MAX_PROBES = 8
"""Probes per round: each refusal costs one more (on what is left after it)."""

PROBE_SECONDS = 20.0
"""A probe still importing after this long is killed and the round given up (the server forks nothing meanwhile)."""

_armed: tuple[int, frozenset[str]] | None = None
"""In a child: where its report goes and the modules its server had when it forked; None: no report."""


def report() -> None:
    """In a child ending (`pymain.finish`): send what it imported that its server had not (1.), if armed."""
    if _armed is None:
        return
    fd, known = _armed
    new = [name for name in list(sys.modules) if name not in known and name != "__main__"]
    if not new:
        return
    head = f"#{os.getpid()}\n"
    chunk = head
    for name in new:
        line = name + "\n"
        if len(chunk) + len(line) > select.PIPE_BUF:
            _write(fd, chunk)
            chunk = head
        chunk += line
    _write(fd, chunk)


def _write(fd: int, text: str) -> None:
    with contextlib.suppress(OSError):  # a full pipe (the report is dropped) or a closed one
        os.write(fd, text.encode())


class Learner:
    """The server's side (2.-4. of the module doc) for the worker of `spec` whose preload read `reads`."""

    def __init__(self, spec: dict, reads: dict[str, str | None]) -> None:
        self.folder = spec["folder"]
        self.volatile = frozenset(spec.get("volatile", ()))
        self.reads = reads
        self.rfd, self.wfd = os.pipe()  # not inherited by a program a child execs
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)
        self.reporters: set[str] = set()
        self.refused: dict[str, str] = {}
        self._partial = b""

    def arm(self) -> None:
        """Children forked from now on report (until `LEARN_FROM` have)."""
        global _armed
        _armed = (self.wfd, frozenset(sys.modules)) if len(self.reporters) < LEARN_FROM else None

    def feed(self) -> dict | None:
        """Read what children reported; learn from it (3.); the `learned` message, if anything was decided."""
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.rfd, 65536):
                data += chunk
        data, _, self._partial = (self._partial + data).rpartition(b"\n")
        if len(self.reporters) >= LEARN_FROM:
            return None  # drained, not learned from
        names: list[str] = []
        for line in data.decode(errors="replace").splitlines():
            if line.startswith("#"):
                self.reporters.add(line)
            elif line:
                names.append(line)
        todo = self.candidates(names)
        if len(self.reporters) >= LEARN_FROM:
            self.arm()  # disarmed: the last report came
        if not todo:
            return None
        learned, refused = self.learn(todo)
        self.arm()  # the modules known to the next children
        return {"op": "learned", "modules": learned, "refused": refused}

    def candidates(self, names: Iterable[str]) -> list[str]:
        """2. of the module doc."""
        out: list[str] = []
        for name in dict.fromkeys(names):
            top = name.partition(".")[0]
            if name in sys.modules or name in self.refused or name == "__main__":
                continue
            if top not in sys.modules and top not in sys.stdlib_module_names:
                continue
            if _own(name, self.folder):
                continue
            out.append(name)
        return out

    def learn(self, todo: list[str]) -> tuple[list[str], dict[str, str]]:
        """3. of the module doc: what was imported, and what was refused (module -> why)."""
        learned: list[str] = []
        refused: dict[str, str] = {}
        for _ in range(MAX_PROBES):
            result = _probe(todo, self.allowed)
            if result is None:
                refused.update({m: "its trial import did not finish" for m in todo})
                todo = []
                break
            bad = result.get("bad")
            passed = todo if bad is None else todo[:todo.index(bad[0])]
            for name in passed:  # what the probe imported before its refusal, in its order: so does this process
                with contextlib.suppress(Exception):
                    importlib.import_module(name)
            learned += [m for m in passed if m in sys.modules]
            if bad is None:
                todo = []
                break
            refused[bad[0]] = bad[1]
            todo = todo[todo.index(bad[0]) + 1:]  # tried from here on, the prefix now the server's own
            if not todo:
                break
        refused.update({m: "too many of its fellows were refused" for m in todo})
        if learned:
            gc.collect()
            gc.freeze()  # as after the preload: a child's collections do not walk (and copy) what was made
        self.refused.update(refused)
        return learned, refused

    def allowed(self, name: str) -> bool:
        """A variable a learned module may look up at import (3. of the module doc)."""
        return name in self.reads and not pymain.volatile(name, self.volatile)


def _own(name: str, folder: str) -> bool:
    """True if module `name` is the worker's own code: found in its folder (or below), by its top-level name
    (`pycommand.own`) or through its nearest imported package's path (`tests.gallery.blackbox.outbox`,
    beside a script in `tests/gallery/blackbox`). Imports nothing."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        package = sys.modules.get(".".join(parts[:i]))
        if package is not None:
            root = os.path.realpath(folder)
            paths = [os.path.realpath(p) for p in getattr(package, "__path__", None) or []]
            if paths:
                return any(p == root or p.startswith(root + os.sep) for p in paths)
            break
    return own(name, folder)


def _probe(modules: list[str], allowed: Callable[[str], bool]) -> dict | None:
    """Import `modules` in a forked copy of this process (3. of the module doc); its verdict
    (`{"bad": [module, why] | None}`), or None if it did not finish within `PROBE_SECONDS`."""
    rfd, wfd = os.pipe()
    me = os.getpid()
    pid = os.fork()
    if pid == 0:  # the probe: its output is nobody's, its verdict on `wfd`
        try:
            signal.set_wakeup_fd(-1)
            os.close(rfd)
            die_with_parent(parent=me)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            verdict = _try(modules, allowed)
            os.write(wfd, json.dumps({"bad": verdict}).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    data = b""
    deadline = time.monotonic() + PROBE_SECONDS
    try:
        while (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(InterruptedError):
                if not select.select([rfd], [], [], left)[0]:
                    continue
                chunk = os.read(rfd, 65536)
                if not chunk:
                    break
                data += chunk
        else:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    finally:
        os.close(rfd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    try:
        return json.loads(data)
    except ValueError:
        return None


def _handlers() -> dict[int, object]:
    return {int(sig): signal.getsignal(sig) for sig in signal.valid_signals()
            if sig not in (signal.SIGKILL, signal.SIGSTOP)}


def _try(modules: list[str], allowed: Callable[[str], bool]) -> list[str] | None:
    """In the probe: import `modules` in turn; the first refused and why (3. of the module doc), or None."""
    threads, fds = pymain._threads(), pymain._fds()
    handlers, environ = _handlers(), dict(os.environ)
    for module in modules:
        reads: dict[str, str | None] = {}
        try:
            with pymain._recording(reads, lambda _name: None):
                importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any failure refuses the module
            return [module, f"its import failed here ({type(exc).__name__})"]
        stray = sorted(n for n in reads if not allowed(n))
        if stray:
            return [module, f"it reads {', '.join(stray)} at import, which the preload did not"]
        if pymain._threads() > threads:
            return [module, "its import left a thread running"]
        if pymain._fds() - fds:
            return [module, "its import left a descriptor open"]
        if _handlers() != handlers:  # the server's own (SIGTERM, SIGCHLD) would be replaced
            return [module, "its import changed a signal's handler"]
        if dict(os.environ) != environ:  # a child's environment is the incarnation's: the change would be lost
            return [module, "its import changed the environment"]
        touched = stand_ins.intact()
        if touched is not None:  # it made something of the server's stand-in, or kept it where no child rebinds
            how, var = touched
            return [module, f"its import used the value of {var}, which differs per run" if how == "used" else
                    f"its import kept the value of {var}, which differs per run, where no child binds its own"]
    return None
