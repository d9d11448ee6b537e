"""Zygotes: preloaded parents that fork Python children (the fork servers, the step module's probe) on request.

A fork server (harness/env/forkserver.py) spends 1.5-3.5 s of CPU importing the anthropic SDK and the
reference worker before its first fork, every session starts two (one per `launcher.HASH_SEEDS`), and the
step module's first import (`stepmodule.probe`) is one more child that imports it. killpoint's own test
suite starts a few hundred sessions. A zygote is one process per hash seed that did those imports once
(`PRELOAD`) and forks such a child whenever a harness asks, so that a test process pays for them once.
`Zygotes` starts them (tests/conftest.py does, for the suite).

`popen` is what a harness calls instead of `subprocess.Popen([sys.executable, "-m"|"-c", ...])`. It uses a
zygote when the child's environment has `ZYGOTE_VAR` (the zygotes' folder, holding `<seed>.sock` and
`info.json`) and the zygote can stand in for a fresh interpreter (`_unfit`: the same interpreter and the
same `PYTHON*`/`LD_*` start-up variables, but for the `HANDLED` ones, which the child takes itself);
otherwise, or if no zygote answers, it returns None and the harness starts its child as always. The
protocol, one connection per child:

1. The harness connects to `<folder>/<PYTHONHASHSEED>.sock` (the first seed's without one) and sends one
   JSON line `{"args": [...], "env": {...}, "cwd": "...", "targets": [N...], "new_session": B}` with the
   descriptors to hand on attached (`SCM_RIGHTS`), one per target number.
2. The zygote forks. The child becomes what `python ARGS`, started by that harness with that environment
   in that directory, would be (`_become`): the leader of its own process group (or session), each
   descriptor on its target (0, 1 and 2 on /dev/null where none is given), exactly `env` as its
   environment, `cwd` as its directory (and its first import folder for `-m`, '' for `-c`), `env`'s
   PYTHONPATH next, its bytecode flag; its `/proc/PID/environ` and `/proc/PID/cmdline` rewritten in place
   to that environment and command line (the zygote is started with room for them, `PAD_VAR`), so that a
   census of processes by a variable in their environment finds the child and every process it forks.
   Then it runs the module as `__main__` (`runpy`) or the code, and ends as an interpreter does.
3. The zygote answers `{"pid": N}`; when the child ends it sends `{"status": S}` (its `waitpid` status)
   and closes the connection. That is how the harness waits for a child that is not its own
   (`ZygoteProcess`: what the launchers use of a `Popen`).
4. If the connection closes while the child lives (the harness exited or was SIGKILLed), the zygote sends
   it SIGTERM: the parent-death signal the harness would otherwise have set (a fork server then kills what
   it forked and exits, as it does on its stdin's end, which comes at the same moment).
5. On its own stdin's end or SIGTERM (the test session is over, or died: its parent-death signal), the
   zygote SIGTERMs every child it forked, SIGKILLs any still there after 10 s, reaps them and exits.

What differs from a fresh interpreter, by design: `PRELOAD` was imported before the egress guard and under
the zygote's environment, so it holds only libraries that neither connect nor read the environment when
imported, and the first calls of the SDKs among them were made in memory (harness/env/sdk_warm.py: what
an SDK caches per process, nothing else); the agent's own modules are imported by the child after it took
`env`, as always; the hash seed
of a child without one is the first zygote's (a fresh one's is random). A black-box fork server
(`--worker-cmd`) never comes from a zygote: what it preloads depends on the run's command.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import fcntl
import gc
import importlib
import json
import os
import runpy
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import IO

import psutil

from killpoint.env import proctitle, sdk_warm
from killpoint.env.launcher import HASH_SEEDS
from killpoint.env.procutil import die_with_parent, dying_with_us, huge_heap, wait_gone

ZYGOTE_VAR = "KILLPOINT_ZYGOTE"
"""The folder of the zygotes to fork children from (`Zygotes`); unset: children start as always."""
PAD_VAR = "KILLPOINT_ZYGOTE_PAD"
"""A zygote starts with this variable, `PAD_BYTES` long, and an argument `ARG_PAD_BYTES` long: room in its
`/proc/PID/environ` and `/proc/PID/cmdline` for a child's own."""
PAD_BYTES = 120_000  # under Linux's 128 KiB limit on one variable
ARG_PAD_BYTES = 8_192  # a fork server's or a probe's command line is a few hundred bytes
PRELOAD = ("anthropic", "httpx2", "psycopg", "psutil", "killpoint.reference_agent.worker",
           "killpoint.cli.args", "killpoint.cli.merge", "killpoint.cli.record", "killpoint.cli.config",
           "killpoint.run.scenario", "killpoint.env.environment", "killpoint.env.postgres.auto")
"""What a zygote imports: the costly libraries of every reference-runtime fork server, and the harness's own
modules (for a CLI forked from it: tests/helpers/sandbox.py), none of which connects or reads the environment
at import (`killpoint.cli.commands`, whose console reads the terminal's variables, is left out, and so is
`killpoint.cli.main`, which the child runs as `__main__`)."""
HANDLED = frozenset({"PYTHONHASHSEED", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"})
"""Start-up variables a zygote's child takes from the harness's environment itself (the hash seed by the
choice of zygote); any other `PYTHON*` or `LD_*` variable must be the zygote's for it to stand in."""
PROTOCOL_FD = 3
INFO = "info.json"
FOLDER_PREFIX = "kpz-"
STALE_AFTER_SECONDS = 60.0
"""How old an unlocked zygotes' folder must be before `sweep_stale` takes it for a dead owner's: far longer than
the moment between its making and its owner's lock (`Zygotes`)."""


# --- the harness's side ---------------------------------------------------------------------------------

class ZygoteProcess:
    """A process forked by a zygote: `pid`, `stdin` (binary, to write) and `stderr` (binary, to read) when
    piped, `poll()`, `wait(timeout)` and `returncode` as a `subprocess.Popen`'s (negative: the signal that
    killed it). Its status comes over the connection (3. of the module docstring)."""

    def __init__(self, conn: socket.socket, pid: int, stdin: IO[bytes] | None, stderr: IO[bytes] | None,
                 args: list[str], buf: bytes) -> None:
        self._conn = conn
        self._buf = buf
        self.pid = pid
        self.stdin = stdin
        self.stderr = stderr
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self._wait(0, polling=True)

    def wait(self, timeout: float | None = None) -> int:
        code = self._wait(timeout, polling=False)
        assert code is not None
        return code

    def _wait(self, timeout: float | None, polling: bool) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if b"\n" in self._buf:
                self.returncode = os.waitstatus_to_exitcode(json.loads(self._buf.split(b"\n", 1)[0])["status"])
                break
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._conn], [], [], left)
            if not readable:
                if polling:
                    return None
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            chunk = self._conn.recv(4096)
            self._buf += chunk
            if not chunk and b"\n" not in self._buf:  # the zygote ended first: it SIGTERMed its children
                self.returncode = -signal.SIGTERM
        with contextlib.suppress(OSError):
            self._conn.close()
        return self.returncode


def popen(args: list[str], env: dict[str, str], pass_fds: dict[int, int] | None = None, *,
          pipe_stdin: bool = False, pipe_stderr: bool = False, new_session: bool = False,
          cwd: str | None = None) -> ZygoteProcess | None:
    """What `subprocess.Popen([sys.executable, *args], env=env, cwd=cwd or os.getcwd())` would start, forked by the
    zygote of `env`'s hash seed (any, if it has none) instead: `args` is `-m MODULE ...` or `-c CODE ...`;
    `pass_fds` maps a descriptor number in the child to one of ours; stdin, stdout and stderr are
    /dev/null unless piped (stdin, stderr) or passed; the child leads a process group of its own (a
    session with `new_session`). None, with nothing left open, when `env` names no zygote, the zygote
    cannot stand in (`_unfit`) or none answers: the caller then starts its process as always."""
    folder = env.get(ZYGOTE_VAR)
    if not folder or not args or args[0] not in ("-m", "-c"):
        return None
    try:
        info = json.loads((Path(folder) / INFO).read_text())
    except (OSError, ValueError):
        return None
    if _unfit(info, env) or sum(len(k) + len(v) + 2 for k, v in env.items()) >= PAD_BYTES \
            or sum(len(a) + 1 for a in (sys.executable, *args)) >= ARG_PAD_BYTES:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mine: list[int] = []  # our ends of the pipes
    theirs: list[int] = []  # the child's ends, closed here once sent
    try:
        conn.connect(str(Path(folder) / f"{env.get('PYTHONHASHSEED', HASH_SEEDS[0])}.sock"))
        targets = dict(pass_fds or {})
        for wanted, fd in ((pipe_stdin, 0), (pipe_stderr, 2)):
            if wanted:
                r, w = os.pipe()
                ours, child = (w, r) if fd == 0 else (r, w)
                mine.append(ours)
                theirs.append(child)
                targets[fd] = child
        request = json.dumps({"args": args, "env": env, "cwd": cwd or os.getcwd(), "targets": list(targets),
                              "new_session": new_session}).encode() + b"\n"
        socket.send_fds(conn, [request], list(targets.values()))
        for fd in theirs:
            os.close(fd)
        theirs = []
        answer = b""
        while b"\n" not in answer:
            chunk = conn.recv(4096)
            if not chunk:
                raise OSError("the zygote closed the connection")
            answer += chunk
        line, rest = answer.split(b"\n", 1)
        pid = int(json.loads(line)["pid"])
    except (OSError, ValueError, KeyError):
        conn.close()
        for fd in (*mine, *theirs):
            with contextlib.suppress(OSError):
                os.close(fd)
        return None
    stdin = os.fdopen(mine.pop(0), "wb") if pipe_stdin else None
    stderr = os.fdopen(mine.pop(0), "rb") if pipe_stderr else None
    return ZygoteProcess(conn, pid, stdin, stderr, [sys.executable, *args], rest)


def _unfit(info: dict, env: dict[str, str]) -> bool:
    """True if a zygote started as `info` says cannot stand in for a fresh interpreter with `env`: another
    interpreter or another environment of it (a virtualenv's `python` is a link to the same binary, with
    other packages: the path and `sys.prefix` must be ours), or a start-up variable it does not take from
    `env` (`HANDLED`) that differs."""
    if (info.get("executable"), info.get("prefix")) != (sys.executable, sys.prefix):
        return True
    theirs: dict[str, str] = info.get("env", {})
    names = {k for k in (*env, *theirs) if k.startswith(("PYTHON", "LD_"))} - HANDLED
    return any(env.get(k) != theirs.get(k) for k in names)


class Zygotes:
    """One zygote per hash seed, started in a folder of their own (`folder`, what `ZYGOTE_VAR` names), under
    `env` (default: this process's) without its credentials. `with Zygotes() as z:` stops them after.

    Starting does not wait for their imports (`wait` does): a harness that asks before a zygote listens starts
    its children as always (`popen` returns None). Starting also removes the folders that owners killed with
    their zygotes left (`sweep_stale`); this one is locked while its owner lives."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        from killpoint.env import credentials  # noqa: PLC0415 - only who starts zygotes needs it

        base = credentials.scrubbed(dict(os.environ if env is None else env))
        base.pop(ZYGOTE_VAR, None)
        sweep_stale()
        self.folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))  # short: a socket's path is at most 107 bytes
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lock: int | None = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # held while we live: the folder is not stale (`sweep_stale`)
        try:
            (self.folder / INFO).write_text(json.dumps({"executable": sys.executable, "prefix": sys.prefix, "env": base}))
            for seed in HASH_SEEDS:
                self._procs.append(subprocess.Popen(
                    [sys.executable, "-m", "killpoint.env.zygote", str(self.folder), "x" * ARG_PAD_BYTES],
                    env={**base, "PYTHONHASHSEED": str(seed), PAD_VAR: "x" * PAD_BYTES}, cwd=self.folder,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, process_group=0, preexec_fn=dying_with_us()))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Zygotes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds until every zygote listens (its `ready` line); True if they all do."""
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            assert proc.stdout is not None
            readable, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not readable or not proc.stdout.readline():
                return False
        return True

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def close(self) -> None:
        """Stop every zygote (its stdin's end: it stops its servers first) and remove the folder."""
        for proc in self._procs:
            with contextlib.suppress(OSError):
                if proc.stdin:
                    proc.stdin.close()
        for proc in self._procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        with contextlib.suppress(OSError):
            for path in self.folder.iterdir():
                path.unlink()
            self.folder.rmdir()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def sweep_stale(where: Path | None = None) -> list[Path]:
    """Remove the zygotes' folders in `where` (default: the temp dir) that a dead owner left: its zygotes
    remove their folder on their way out (`serve`), unless they were SIGKILLed with it (a `killpoint serve`
    or a test session killed whole). A folder is removed only if it is a real directory of this user named
    `kpz-*`, unchanged for `STALE_AFTER_SECONDS`, holding nothing but `info.json` and sockets, and its lock
    is free: its owner (`Zygotes`) holds an exclusive `flock` on it from its making to its removal, which
    the kernel releases when the owner dies. Returns the folders removed."""
    removed: list[Path] = []
    root = Path(tempfile.gettempdir() if where is None else where)
    try:
        entries = [e for e in root.iterdir() if e.name.startswith(FOLDER_PREFIX)]
    except OSError:
        return removed
    for folder in entries:
        with contextlib.suppress(OSError):
            if _stale(folder):
                for path in folder.iterdir():
                    path.unlink()
                folder.rmdir()
                removed.append(folder)
    return removed


def _stale(folder: Path) -> bool:
    """`sweep_stale`'s test of one folder (its lock is taken and released here, never kept)."""
    st = folder.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or time.time() - st.st_mtime < STALE_AFTER_SECONDS:
        return False
    if any(p.name != INFO and not p.is_socket() for p in folder.iterdir()):
        return False  # not what zygotes leave: not ours to remove
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its owner lives
    finally:
        os.close(fd)  # the lock, if taken, goes with it: the folder is removed next, and no one makes it again
    return True


# --- the zygote's side ----------------------------------------------------------------------------------

def serve(folder: Path) -> int:
    """Import `PRELOAD`, listen on `<folder>/<hash seed>.sock` and fork children until stdin ends or SIGTERM
    (1.-5. of the module docstring)."""
    die_with_parent(signal.SIGTERM)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the test session decides when we stop
    for name in PRELOAD:
        importlib.import_module(name)
    import httpx2  # noqa: PLC0415 - the first client imports its transport stack (~0.3 s): once, here

    httpx2.Client().close()
    sdk_warm.warm()  # the preloaded SDK's first calls, in memory: no fork server of ours makes them again
    if threading.active_count() > 1:  # forking would copy a thread's held locks without the thread
        print(f"zygote: the preload left {threading.active_count() - 1} thread(s) running; not serving",
              file=sys.stderr)
        return 1
    gc.collect()
    gc.freeze()
    # The children share these pages already on 2 MB pages: a fork server's own `huge_heap` then has
    # nothing left to copy (4 ms, not the 30-100 ms of collapsing ~50 MB shared with us into pages of its
    # own), and every child's fork and exit handle one page-table entry per 2 MB.
    huge_heap()
    path = folder / f"{os.environ.get('PYTHONHASHSEED', '0')}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
    except FileNotFoundError:  # stopped while importing: the other zygote, out first, removed the folder (below)
        listener.close()
        return 0
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stdin = sys.stdin.buffer
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    pending: dict[socket.socket, int | None] = {}  # a connection -> its child's pid (None: not forked yet)
    live: dict[int, socket.socket | None] = {}  # a child's pid -> its connection (None: closed)
    try:
        while not stopping:
            _reap(live, pending)
            try:
                readable, _, _ = select.select([stdin, listener, wake_r, *pending], [], [])
            except InterruptedError:
                continue
            if wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
            if stdin in readable and not os.read(stdin.fileno(), 4096):
                return 0
            if listener in readable:
                with contextlib.suppress(OSError):
                    conn, _ = listener.accept()
                    pending[conn] = None
            for conn in [c for c in readable if isinstance(c, socket.socket) and c in pending]:
                pid = pending[conn]
                if pid is None:
                    _fork_child(conn, pending, live, [listener, *pending])
                    continue
                with contextlib.suppress(OSError):
                    if conn.recv(4096):
                        continue  # nothing more is said on it: ignored
                # The harness is gone while its server lives: the parent-death signal it would have sent.
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                del pending[conn]
                conn.close()
                live[pid] = None
        return 0
    finally:
        _stop_all(live)
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):  # the last zygote out removes the folder (SIGKILLed test session too)
            if not any(folder.glob("*.sock")):
                (folder / INFO).unlink()
                folder.rmdir()


def _fork_child(conn: socket.socket, pending: dict[socket.socket, int | None],
                 live: dict[int, socket.socket | None], sockets: list[socket.socket]) -> None:
    """Read a request on `conn` and fork its process (2.-3.); a request that cannot be read closes `conn`."""
    data, fds = b"", []
    try:
        while b"\n" not in data:
            chunk, more, _flags, _addr = socket.recv_fds(conn, 1 << 20, 16)
            if not chunk:
                raise OSError("closed before a request")
            data += chunk
            fds += more
        request = json.loads(data.split(b"\n", 1)[0])
        if len(fds) != len(request["targets"]):
            raise ValueError(f"{len(fds)} descriptors for {len(request['targets'])} targets")
        pid = os.fork()
    except (OSError, ValueError, KeyError):
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        del pending[conn]
        conn.close()
        return
    if pid == 0:
        code = 1
        try:
            for sock in sockets:
                sock.detach()  # its descriptor is closed with the zygote's others (`_become`)
            code = _become(request, fds)
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    if not request.get("new_session"):  # a group leader could not make a session: the child makes its own
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # before `pid` is said: the group exists when the harness signals it
    pending[conn] = pid
    live[pid] = conn
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _reap(live: dict[int, socket.socket | None], pending: dict[socket.socket, int | None]) -> None:
    """Reap every ended child and tell its harness its status (3.)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = live.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"status": status}).encode() + b"\n")
            pending.pop(conn, None)
            conn.close()


def _stop_all(live: dict[int, socket.socket | None]) -> None:
    """SIGTERM every live child, SIGKILL those left after 10 s, reap them all (5.)."""
    procs: list[psutil.Process] = []
    for pid in live:
        with contextlib.suppress(OSError, psutil.Error):
            os.kill(pid, signal.SIGTERM)
            procs.append(psutil.Process(pid))
    for proc in wait_gone(procs, 10.0):
        with contextlib.suppress(psutil.Error):
            proc.kill()
    for conn in live.values():
        if conn is not None:
            conn.close()
    with contextlib.suppress(ChildProcessError):
        while True:
            os.waitpid(-1, 0)


def _become(request: dict, fds: list[int]) -> int:
    """In the forked child: become `python ARGS` of `request`, started by its harness (2. of the module
    docstring), run it, and end as an interpreter does (its non-daemon threads joined, `atexit` run); the
    exit code."""
    if request.get("new_session"):
        os.setsid()
    else:
        os.setpgid(0, 0)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has them
    _descriptors(dict(zip(request["targets"], fds, strict=True)))
    env: dict[str, str] = request["env"]
    args: list[str] = request["args"]
    old_front = _front(os.environ.get("PYTHONPATH", ""))
    os.chdir(request["cwd"])
    os.environ.clear()  # unsets every variable C's `environ` held from the start: none points into the block now
    os.environ.update(env)
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    first = os.getcwd() if args[0] == "-m" else ""  # as `python -m` and `python -c` put it first
    _rebase_path(old_front, [first, *_entries(env.get("PYTHONPATH", ""))])
    proctitle.rewrite([sys.executable, *args], env)
    code = 0
    try:
        if args[0] == "-m":
            sys.argv = ["-m", *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *args[2:]]
            # dont_inherit: as `python -c` compiles it, without this module's `annotations` future
            program = compile(args[1], "<string>", "exec", dont_inherit=True)
            exec(program, {"__name__": "__main__", "__builtins__": builtins})  # noqa: S102
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter says it, on stderr
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def _descriptors(targets: dict[int, int]) -> None:
    """Put each received descriptor on its number in `targets`, /dev/null on 0, 1 and 2 where none is
    given, and close every other (the zygote's listener, connections and pipes)."""
    full = {n: os.open(os.devnull, os.O_RDWR) for n in (0, 1, 2) if n not in targets} | targets
    # Above every target first: a source may sit on another's target (the zygote's own 0-3 are still open).
    high = {n: fcntl.fcntl(fd, fcntl.F_DUPFD, 64 + max(full)) for n, fd in full.items()}
    for n, fd in high.items():
        os.dup2(fd, n)
    keep = sorted(high)
    for lo, hi in zip([-1, *keep], [*keep, os.sysconf("SC_OPEN_MAX")], strict=True):
        if hi - lo > 1:
            os.closerange(lo + 1, hi)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115


def _entries(pythonpath: str) -> list[str]:
    return [os.path.abspath(p) for p in pythonpath.split(os.pathsep) if p]


def _front(pythonpath: str) -> list[str]:
    """The zygote's own first import folders: its directory (`-m`) and its PYTHONPATH."""
    return [sys.path[0], *_entries(pythonpath)] if sys.path else []


def _rebase_path(old_front: list[str], new_front: list[str]) -> None:
    """Make `sys.path` start with `new_front` (the harness's directory and PYTHONPATH) instead of the
    zygote's `old_front`, and forget what was imported of the top-level packages that folders new to the
    path hold (so they are imported from there, as a fresh interpreter would)."""
    rest = [p for p in sys.path if p not in old_front]
    fresh = [p for p in dict.fromkeys(new_front) if p not in old_front]
    sys.path[:] = [*dict.fromkeys(new_front), *[p for p in rest if p not in new_front]]
    tops: set[str] = set()
    for folder in fresh:
        with contextlib.suppress(OSError):
            tops |= {name.removesuffix(".py") for name in os.listdir(folder)}
    for name in [n for n in sys.modules if n.split(".")[0] in tops]:
        del sys.modules[name]
    importlib.invalidate_caches()


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1])))  # argv[2] is padding (`ARG_PAD_BYTES`)
