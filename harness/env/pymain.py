"""A fork server's side of black-box Python workers: the preload, checked, and a forked child that runs the
worker's script or module as `__main__`, as a fresh interpreter would.

In the server (harness/env/forkserver.py, started with `--black-box=JSON`):

1. `preload(spec)` puts the worker's folder first on `sys.path` (a fresh interpreter's `sys.path[0]`) and
   imports each module of `spec["modules"]` in turn, recording every environment variable read meanwhile
   (`os.environ[...]`, `.get`, `in`, `os.getenv`: every key looked up through `os._Environ`).
2. A per-run variable (`spec["volatile"]` by name, or a name starting with one of `VOLATILE_PREFIXES`: the
   run's service URLs, its database, its ids) looked up at import gets a stand-in, and each child its own
   value in the globals that kept it (harness/env/stand_ins.py: the resend SDK's `api_url`). A module
   whose import looked at that value, kept it elsewhere, or failed (or looked it up in `os.environb`) could
   have made something of the server's value: the server starts afresh without it, with the modules its
   import loaded in its place, less those of its own package and of every package that was being imported
   when such a variable was read (`_restart`: an import cannot be undone, as what it made may be held
   elsewhere: dropping it from `sys.modules` broke SQLAlchemy's caches in DBOS), and each incarnation
   imports it, as it does a module whose import failed in the server. Every other lookup is kept (`reads`,
   name -> value seen or None): the launcher forks an incarnation only if its environment has those same
   values, and each variable stood in for (`stood_in`) set.
3. A handler an import set for a signal the server handles itself (`FRESH_SIGNALS`: a library's SIGTERM
   handler, say) is set again in each child in place of the default (`_fresh_signals`), as a fresh
   interpreter importing it would have it; the server then sets its own back. So is a variable an import
   set or removed (`os.environ.setdefault` reads it too: an incarnation whose value differs is exec'd, 2.).
4. A preload that left a thread running (`threading.active_count()`, `/proc/self/task`) or a descriptor
   open that was not before cannot be forked faithfully (the thread is not in the child; the descriptor and
   its offset would be shared by every incarnation): `unsafe` says which module and why, and the launcher
   execs every incarnation instead.

Not seen: a variable read through C's `getenv` at import (no Python lookup), and a whole-environment copy
made at import (iterating `os.environ`: platform's `file` call under croniter does; the copy lacks the
per-incarnation variables, which the server's environment does not have).

In a child (`run_main`): the variables the preload's imports set (3.), the per-run values bound (2.), a fresh
interpreter's signal dispositions (SIGINT raises KeyboardInterrupt, SIGPIPE and SIGXFSZ ignored) but for the
handlers those imports set, `sys.argv`, `sys.orig_argv`, a new `__main__` module running the script's code
(`script_code`: compiled as `python` compiles it, once by the server while the file is unchanged; or `runpy`'s
`-m` path), and its end as `Py_FinalizeEx` does it: an uncaught exception printed by `sys.excepthook` (exit
1), `SystemExit`'s code (None 0, text printed and 1), non-daemon threads joined, `atexit` handlers run, the
files it left open for writing flushed (harness/env/open_files.py), then `finish`'s `report` (the modules it
imported, while its server learns: harness/env/preload_learning.py), the standard streams flushed.
"""

from __future__ import annotations

import atexit
import builtins
import collections.abc
import contextlib
import importlib
import io
import json
import os
import runpy
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator
from importlib.machinery import SourceFileLoader
from typing import Any

from killpoint.env import open_files, proctitle, stand_ins

VOLATILE_PREFIXES = ("KILLPOINT_",)
"""Variables of these prefixes differ per incarnation or per run (its id, socket, parameters)."""


def _fds() -> set[str]:
    try:
        return set(os.listdir("/proc/self/fd"))
    except OSError:
        return set()


def _threads() -> int:
    try:
        return max(threading.active_count(), len(os.listdir("/proc/self/task")))
    except OSError:
        return threading.active_count()


@contextlib.contextmanager
def _recording(reads: dict[str, str | None], seen: Callable[[str], None],
               stand_in: Callable[[str], bool] = lambda _name: False) -> Iterator[None]:
    """Within: every key looked up in `os.environ` (or `os.environb`) is recorded in `reads` with the value
    found (None: absent); `seen(name)` is called on every lookup, before it. A name absent for which
    `stand_in(name)` is true is not recorded: it is found, with a stand-in's value (harness/env/stand_ins.py)."""
    cls = os._Environ
    original = cls.__getitem__

    def lookup(self: Any, key: Any) -> Any:
        name = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        seen(name)
        try:
            value = original(self, key)
        except KeyError:
            if self is os.environ and stand_in(name):
                return stand_ins.stand_in(name, kept=sys._getframe(1).f_code is not _CONTAINS)
            reads.setdefault(name, None)
            raise
        reads.setdefault(name, value.decode(errors="replace") if isinstance(value, bytes) else value)
        return value

    cls.__getitem__ = lookup  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.__getitem__ = original  # type: ignore[method-assign]


_CONTAINS = collections.abc.Mapping.__contains__.__code__
"""`VAR in os.environ` looks the value up from here, and drops it."""


def _initializing(module: object) -> bool:
    """True while `module` is still being executed (on the import stack)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def volatile(name: str, names: frozenset[str]) -> bool:
    """True if `name` differs per incarnation: one of `names`, or of `VOLATILE_PREFIXES` and not in the
    server's environment (what it has is the session's, the same for every incarnation)."""
    return name in names or (name.startswith(VOLATILE_PREFIXES) and name not in os.environ)


BLACK_BOX_ARG = "--black-box"
"""`--black-box=JSON`: the fork server's argument that makes it a black-box worker's (harness/env/forkserver.py)."""


def _restart(spec: dict, environ: dict[str, str], commands: int | None) -> None:
    """Start this server afresh (same pid, pipes and group: `execve`) with `spec`, in `environ` (its own before
    the preload changed any): a module's import cannot be undone (another module may hold what it made), so
    one that must not be preloaded is left out this way. `commands`: the server's command pipe, which it
    moved off its stdin, is put back there for the new start to find. Never returns."""
    arg = f"{BLACK_BOX_ARG}={json.dumps(spec)}"
    argv = [arg if a.startswith(BLACK_BOX_ARG + "=") else a for a in sys.orig_argv[1:]]
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    if commands is not None:
        os.dup2(commands, 0)
    os.execve(sys.executable, [sys.executable, *argv], environ)


_imported_environ: dict[str, str | None] = {}
"""The variables the preload's imports set (value) or removed (None): a child's environment is exactly the
incarnation's, so they are made again there (`run_main`), as a fresh interpreter's imports would make them."""


def _environ_changes(before: dict[str, str]) -> dict[str, str | None]:
    now = dict(os.environ)
    return {**{k: v for k, v in now.items() if before.get(k) != v}, **{k: None for k in before if k not in now}}


def preload(spec: dict, commands: int | None = None) -> dict:
    """Steps 1-4 of the module doc; what the server says in its `ready` line: `preloaded` (modules),
    `skipped` (module -> why), `reads` (variable -> value seen or None), `unsafe` (why forking would not be
    equivalent, or None). `commands`: the server's command pipe (`_restart`)."""
    folder = spec["folder"]
    if sys.path and sys.path[0] == os.getcwd() and not spec.get("module"):
        sys.path[0] = folder  # `-m killpoint.env.forkserver` put the working directory there; a script's is its folder
    elif not sys.path or sys.path[0] != folder:
        sys.path.insert(0, folder)
    names = frozenset(spec.get("volatile", ()))
    reads: dict[str, str | None] = {}
    stood: dict[str, list[str]] = {}  # per-run variables stood in for -> the globals bound to them
    preloaded: list[str] = []
    skipped: dict[str, str] = dict(spec.get("skipped", {}))
    quiet = set(spec.get("quiet", ()))  # preloaded in a skipped module's place: not named in the report
    unsafe = None
    threads, fds = _threads(), _fds()
    handlers = {sig: signal.getsignal(sig) for sig in FRESH_SIGNALS}
    environ = dict(os.environ)
    for module in spec["modules"]:
        mine: dict[str, str | None] = {}
        before = set(sys.modules)
        tainted: set[str] = set()  # the packages being imported whenever a volatile variable was read
        first = len(stand_ins.made)

        def seen(name: str, before: set[str] = before, tainted: set[str] = tainted) -> None:
            if volatile(name, names):
                tainted.update(n.split(".")[0] for n, m in list(sys.modules.items())
                               if n not in before and _initializing(m))

        failed = None
        try:
            with _recording(mine, seen, lambda name: volatile(name, names)):
                importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - the incarnation meets it itself
            failed = f"its import failed here ({type(exc).__name__})"
        caught = sorted(n for n in mine if volatile(n, names))  # looked up in `os.environb`: no stand-in
        bound, why = stand_ins.bindings(first) if not caught and failed is None else (None, "")
        if failed is not None and len(stand_ins.made) == first:
            if module not in quiet:
                skipped[module] = failed
            continue
        if bound is None:  # what it made from a per-run value (or a stand-in) stays with its modules: left out
            tainted.add(module.split(".")[0])
            deps = [n for n in sys.modules if n not in before and n.split(".")[0] not in tainted
                    and n not in spec["modules"]]
            read = caught or sorted({v.var for v in stand_ins.made[first:]})
            reason = why if why else f"it reads {', '.join(read)} at import"
            skipped[module] = (f"{failed}; " if failed else "") + f"{reason}, which differs per run" + \
                (f" ({len(deps)} modules of other packages it imported are preloaded)" if deps else "")
            i = spec["modules"].index(module)
            _restart({**spec, "modules": [*spec["modules"][:i], *deps, *spec["modules"][i + 1:]], "skipped": skipped,
                      "quiet": sorted({*quiet, *deps})}, environ, commands)
        for var, places in bound.items():
            stood.setdefault(var, []).extend(places)
        if module not in quiet:
            preloaded.append(module)
        for k, v in mine.items():
            reads.setdefault(k, v)
        if _threads() > threads:
            unsafe = f"importing {module} left {_threads() - threads} thread(s) running"
            break
        opened = _fds() - fds
        if opened:
            unsafe = f"importing {module} left {len(opened)} descriptor(s) open"
            break
    _imported_handlers.update({sig: now for sig, before in handlers.items()
                               if (now := signal.getsignal(sig)) is not before})
    _imported_environ.update(_environ_changes(environ))
    if spec.get("script"):
        with contextlib.suppress(Exception):  # unreadable or not Python: each incarnation meets it as `python` would
            script_code(spec["script"])
    return {"preloaded": preloaded, "skipped": skipped, "reads": reads, "stood_in": stood, "unsafe": unsafe}


_compiled: dict[str, tuple[tuple[int, ...], types.CodeType]] = {}
"""Script path -> the identity of the file compiled (`_identity`) and its code (`script_code`)."""


def _identity(path: str) -> tuple[int, ...]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def script_code(script: str) -> types.CodeType:
    """The code of `script` as `python SCRIPT` compiles it: with none of the future features of the code
    calling `compile` (`dont_inherit`: this module's `annotations` would postpone the script's), compiled
    once while the file is the same (device, inode, size and modification time as when it was compiled,
    so an edited or a different file at the path is compiled afresh). The server compiles it in `preload`,
    so that its children find it compiled."""
    identity = _identity(script)
    cached = _compiled.get(script)
    if cached is not None and cached[0] == identity:
        return cached[1]
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec", dont_inherit=True)
    _compiled[script] = (identity, code)
    return code


FRESH_SIGNALS: dict[int, Any] = {signal.SIGINT: signal.default_int_handler, signal.SIGPIPE: signal.SIG_IGN,
                                 signal.SIGXFSZ: signal.SIG_IGN, signal.SIGTERM: signal.SIG_DFL,
                                 signal.SIGCHLD: signal.SIG_DFL}
"""The signals whose handling a child sets afresh (`_fresh_signals`), each to a fresh interpreter's
disposition (SIGINT raises KeyboardInterrupt, SIGPIPE and SIGXFSZ ignored): the server handles them its own way."""

_imported_handlers: dict[int, Any] = {}
"""The handlers the preload's imports set for `FRESH_SIGNALS` (`preload`): a fresh interpreter importing the
same modules would have them."""


def _fresh_signals() -> None:
    """The dispositions a fresh interpreter has once it imported the preloaded modules: its defaults, but
    for a handler an import set (`_imported_handlers`: a library's SIGTERM handler, say)."""
    for sig, handler in {**FRESH_SIGNALS, **_imported_handlers}.items():
        signal.signal(sig, handler)


def _streams() -> None:
    """Standard streams over fds 1-2 as a fresh interpreter opens them for a file: stdout block-buffered,
    stderr line-buffered with backslashreplace, both unbuffered under `PYTHONUNBUFFERED` (the child's
    environment, already set), in the encoding the server's own streams got."""
    encoding = getattr(sys.__stdout__, "encoding", None) or "utf-8"
    sys.stdout = sys.__stdout__ = _stream(1, encoding, "strict", line=False)
    sys.stderr = sys.__stderr__ = _stream(2, encoding, "backslashreplace", line=True)


def _stream(fd: int, encoding: str, errors: str, line: bool) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    if os.environ.get("PYTHONUNBUFFERED"):  # as the interpreter reads it at start (no sys.flags of its own)
        return io.TextIOWrapper(raw, encoding=encoding, errors=errors, line_buffering=line, write_through=True)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors=errors, line_buffering=line)


def run_main(spec: dict, argv: list[str]) -> int:
    """Run the worker of `spec` (`script` or `module`) as `__main__` with arguments `argv`; its exit code
    (module doc, the child). Call in the forked child with the incarnation's environment already set."""
    for name, value in _imported_environ.items():  # what the preload's imports did to the environment (3.)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    stand_ins.bind()  # the per-run values a preloaded module read at import (2.)
    open_files.track()  # flushed at the end, as a fresh interpreter's finalization would (`_finalize`)
    _fresh_signals()
    _streams()
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    script, module = spec.get("script"), spec.get("module")
    sys.orig_argv = [sys.executable, *(["-m", module] if module else [script]), *argv]
    with contextlib.suppress(OSError, ValueError):  # what ps and /proc/self/cmdline show: the worker's command
        proctitle.rewrite(sys.orig_argv)
    try:
        if module:
            sys.argv = ["-m", *argv]
            runpy._run_module_as_main(module, alter_argv=True)  # type: ignore[attr-defined] # what `python -m` runs
        else:
            sys.argv = [script, *argv]
            code = script_code(script)
            main.__dict__.update(__file__=script, __cached__=None, __spec__=None,
                                 __loader__=SourceFileLoader("__main__", script))
            exec(code, main.__dict__)  # noqa: S102 - the worker's own script, as `python SCRIPT` runs it
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt:
        _finalize()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as CPython ends on an uncaught KeyboardInterrupt
        return 130
    except BaseException:  # noqa: BLE001 - printed as an uncaught exception is
        sys.excepthook(*sys.exc_info())
        return 1


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(Exception):
        print(exc.code, file=sys.stderr)
    return 1


def _finalize() -> None:
    """What `Py_FinalizeEx` does before the process ends: join non-daemon threads, run `atexit` handlers,
    flush the files the worker left open (harness/env/open_files.py)."""
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    open_files.flush()


def finish(code: int, report: Callable[[], None] | None = None) -> None:
    """End the child with `code` as a fresh interpreter's shutdown would (module doc), calling `report` once
    its `atexit` handlers have run (harness/env/preload_learning.py). Never returns."""
    _finalize()
    if report is not None:
        with contextlib.suppress(Exception):
            report()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)
