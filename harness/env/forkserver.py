"""The fork server: a process that has already imported the agent, and forks incarnations on request.

`import anthropic` alone costs about a second; a fork from a process that imported it costs a few
milliseconds. Run as `python -m killpoint.env.forkserver MODULE [MODULE...] --protocol-fd=N`; it imports the
modules (and the SDK, unless no step of theirs may call the model: `_warm`; with `--probe`, the first module
as the harness's check of it, said first: `_probe`), says `{"op": "ready", "pid": N,
"sdk": B, "warmed": [...]}` (B: whether it imported the SDK; `warmed`: the SDKs whose first calls it made,
harness/env/sdk_warm.py) on descriptor N (a pipe of the harness's: stdout is the agent's, which may
print while it is imported; stdout without the option), then reads JSON commands on stdin, one per line (moved
off descriptor 0 first, which gets /dev/null: what the agent reads from stdin at import is the end of input):

    {"op": "spawn", "inc": "w3", "argv": ["RUN_ID"], "env": {...}, "log": "/path/w3.log"}

and answers `{"op": "spawned", "inc": "w3", "pid": N}`, then (unless started with `--no-standby`)
`{"op": "standby", "pid": M}`: the child it forked ahead for the next spawn (see `_Server`). It reports every child's state change:
`{"op": "stopped"|"continued", "pid": N}` and `{"op": "exited", "pid": N, "exit_code": C, "signal": S, "cpu": SECONDS}` (the child's own user + system CPU
time, from `wait4`).
A child runs `killpoint.reference_agent.worker.main(argv)` with exactly `env` as its environment, its log
headed by what the step module printed while the server imported it (`_capturing`) (and, when
it was the standby, the Postgres session it opened ahead, named for the incarnation, its connection to the
kill-point socket and, where the SDK is imported, the SDK's client: `_ahead`) and exits with its return value. A child whose `env` puts folders on PYTHONPATH that the server's import path lacks
(an earlier version of the agent, `killpoint.env.previous`) imports from them first, as a fresh interpreter
would: they go first on its `sys.path`, and what the server imported of the packages they hold is dropped
(`_prepend_paths`). Each child is the leader of its own process group (set by both sides of the fork, so
the group exists before `spawned` is said): whatever the worker starts stays in that group.

The server is a child subreaper: a worker's descendant whose parents died is adopted by the server (and
reaped by it) rather than by init, so one that left its group (`setsid`) is still the server's descendant.
On stdin EOF (the harness is done) or SIGTERM (its parent-death signal: the harness died) it SIGKILLs every
group it made and every descendant it has, reaps them, and exits.
Before it imports the agent it installs the egress guard (`egress`) and `lazy_tls` (a TLS context made in a
child parses its CA bundle at its first handshake, not when an SDK's client makes it: the fakes are plain HTTP).
A black-box worker's server says `{"op": "importing"}` as its preload starts and at each restart of it
(`pymain._restart`): the harness bounds each (`ForkLauncher.ready`).
A black-box worker's server also imports, between forks, what its first incarnations imported lazily
(`preload_learning`), and says `{"op": "learned", "modules": [...], "refused": {...}}` before the exits of
the children that reported it.
The server is single-threaded on purpose: forking a multi-threaded process can inherit held locks.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import json
import os
import select
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psutil

from killpoint.env import egress, lazy_tls, preload_learning, pymain, worker_clock
from killpoint.env.postgres import conninfo
from killpoint.env.procutil import (
    become_subreaper,
    decode_status,
    die_with_parent,
    huge_heap,
    pgid,
    wait_gone,
)


def _child(argv: list[str], env: dict[str, str], log: str | None, fds: list[int]) -> None:
    """In the forked child: become the worker. Never returns."""

    def body() -> int:
        _detach(fds)
        return _become(argv, env, log)

    _exit_with(body)


def _black_box_child(spec: dict, argv: list[str], env: dict[str, str], log: str | None, fds: list[int]) -> None:
    """In a child forked for a black-box Python worker (`--black-box`): become its script or module run as
    `__main__` (harness/env/pymain.py) with exactly `env`. Never returns."""
    code = 1
    try:
        _detach(fds)
        _take(env, log)  # forked workers are guarded as the reference runtime's are
        code = pymain.run_main(spec, argv)
    except BaseException:  # noqa: BLE001 - killpoint's own failure to become the worker: said in its log
        traceback.print_exc()
    finally:
        pymain.finish(code, preload_learning.report)


def _exit_with(body: Callable[[], int]) -> None:
    """In a forked child: run `body` and exit with its code (a `SystemExit`'s, or 1 with the traceback on
    stderr for any other exception), after waiting for its non-daemon threads as an interpreter's shutdown
    does (so an agent that leaves one running hangs here as it would under `--spawn exec`), flushing the
    standard streams first. Never returns."""
    code = 1
    try:
        code = body()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        _join_threads()
        _exit(code)


def _join_threads() -> None:
    """Wait for every non-daemon thread, as `Py_FinalizeEx` does (`threading._shutdown`, which also runs
    the `threading._register_atexit` hooks: concurrent.futures' executors join their workers there)."""
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]


def _detach(fds: list[int]) -> None:
    """A new child's own set-up, before it knows which incarnation it is: its own process group, death
    with the server, default signal handlers, none of the server's descriptors, stdin from /dev/null."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # the parent does the same; whichever runs first makes the group
    die_with_parent(parent=_server_pid or None)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    _stdin_from_devnull()


def _stdin_from_devnull() -> None:
    """Descriptor 0, and `sys.stdin` over it, read /dev/null."""
    devnull = os.open(os.devnull, os.O_RDONLY)  # fd 0 itself when 0 was closed
    if devnull != 0:
        os.dup2(devnull, 0)
        os.close(devnull)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115


def _take(env: dict[str, str], log: str | None) -> None:
    """In a forked child: take the incarnation's log (fds 1 and 2, if any; headed by what the step module
    printed while the server imported it, `_import_output`), exactly its environment, and its egress guard."""
    if log:
        _output_to(log)
        _write_all(1, _import_output)
    _environ_to(worker_clock.sharing(env, os.environ))  # a clock server's pair named for what it runs
    egress.install_from_env()  # this incarnation's hosts (the server's were the session's: the same)
    egress.flush()  # what the server's import of the agent tried, reported to this run


IMPORT_OUTPUT_LIMIT = 1 << 20
"""At most this many bytes of a step module's import-time output are kept (`_import_output`)."""

_import_output = b""
"""What the step module wrote on stdout and stderr, in order, while this server imported it (`_capturing`):
each incarnation writes it at the head of its log (`_take`), where `python -m ...worker` under `--spawn exec`
prints it as it imports the module (its prints, its warnings). Never a black-box worker's libraries'."""


@contextlib.contextmanager
def _capturing() -> Iterator[None]:
    """Within: descriptors 1 and 2 write to a memory file; after, they are what they were, and what was
    written is added to `_import_output`. Where the system has no memory file, nothing is captured."""
    global _import_output
    _flush_std()
    try:
        memfd = os.memfd_create("killpoint-import-output", os.MFD_CLOEXEC)
        saved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (1, 2)]
    except OSError:
        yield
        return
    os.dup2(memfd, 1)
    os.dup2(memfd, 2)
    try:
        yield
    finally:
        _flush_std()
        for fd, old in zip((1, 2), saved, strict=True):
            with contextlib.suppress(OSError):  # a module that closed every descriptor: nothing to restore
                os.dup2(old, fd)
                os.close(old)
        try:
            room = IMPORT_OUTPUT_LIMIT - len(_import_output)
            _import_output += os.pread(memfd, max(0, min(os.fstat(memfd).st_size, room)), 0)
        except OSError:
            pass  # closed by the module: what it wrote is lost, as nothing else is
        finally:
            with contextlib.suppress(OSError):
                os.close(memfd)


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _write_all(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data):]


def _environ_to(env: dict[str, str]) -> None:
    """Make `os.environ` exactly `env`, changing only the variables that differ. (`clear()` then `update()`
    unsets and sets every one of them through `MutableMapping.popitem`: the largest part of a child's own
    Python time in a profile of the reference worker.)"""
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _become(argv: list[str], env: dict[str, str], log: str | None, conn: Any = None) -> int:
    """Take the incarnation's log, environment and import path, and run the worker (on `conn`, a session
    opened ahead, if it is still usable); its exit code."""
    _take(env, log)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    if _prepend_paths(env.get("PYTHONPATH", "")) and conn is not None:
        conn.close()  # the worker's modules come from elsewhere now: its session is its own to open
        conn = None
    present = False
    if conn is not None:
        conn, present = _named(conn, env)
    from killpoint.reference_agent import worker

    return int(worker.main(argv, conn=conn, tables_checked=present) or 0)


def _output_to(path: str) -> None:
    """Point stdout and stderr (fds 1 and 2) at `path`, appended to."""
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    if out > 2:
        os.close(out)


def _exit(code: int) -> None:
    _flush_std()
    os._exit(code)


STANDBY_NAME = "killpoint-standby"
"""The name (`application_name`, `killpoint.inc`) of a standby's session until an incarnation takes it."""


def _standby(env: dict[str, str], rfd: int, fds: list[int]) -> None:
    """In a forked standby: open the session of the next incarnation ahead (and do the rest of `_ahead`),
    then wait on `rfd` for the spawn command that makes this process that incarnation, and become it. Never returns; exits 0 on EOF
    (the server dropped it) without a command."""

    def body() -> int:
        _detach(fds)
        _output_to(os.devnull)  # until it is an incarnation with a log
        _environ_to(conninfo.standby_env(env, STANDBY_NAME))
        conn = _open_ahead(os.environ.get("DATABASE_URL", ""))
        _ahead()
        data = b""
        while chunk := os.read(rfd, 65536):
            data += chunk
        os.close(rfd)
        if not data:
            return 0
        cmd = json.loads(data)
        return _become(cmd["argv"], cmd["env"], cmd.get("log"), conn)

    _exit_with(body)


def _open_ahead(dsn: str) -> Any:
    """A session for the next incarnation, its catalogue caches warmed and the statement that will rename it
    prepared by running it now with the standby's own names (`worker.take_session`, its check and its
    settings as they are); None if none can be opened now (the worker then connects itself, and meets the
    same error)."""
    if not dsn:
        return None
    try:
        import psycopg  # noqa: PLC0415 - imported by the worker module already

        from killpoint.reference_agent import worker  # noqa: PLC0415

        conn = psycopg.connect(dsn, autocommit=True)
    except Exception:  # noqa: BLE001 - a standby only saves time
        return None
    with contextlib.suppress(Exception):
        worker.take_session(conn, conninfo.identity(os.environ))
    return conn


def _ahead() -> None:
    """What the next incarnation would do first that does not depend on which one it is, done from this
    standby's environment (the previous spawn's) before the spawn (`worker.ahead`): the SDK's client, where
    the SDK is imported (taken only where the incarnation's environment agrees), and the connection to the
    harness's kill-point socket."""
    with contextlib.suppress(Exception):  # a standby only saves time
        from killpoint.reference_agent import worker  # noqa: PLC0415 - imported by the server already

        worker.ahead()


def _named(conn: Any, env: dict[str, str]) -> tuple[Any, bool]:
    """`conn` named for the incarnation of `env` (`conninfo.identity`), and whether the runtime's tables are
    there (the worker's own table check, made in the same round trip: `worker.take_session`); (None, False)
    (closed) if the session is no longer usable: the server restarted since (a db-crash) or went away."""
    from killpoint.reference_agent import worker  # noqa: PLC0415 - imported by the server already

    try:
        if conn.closed or conn.info.transaction_status != 0:  # 0: idle
            raise OSError("not idle")
        # One round trip either way: it also finds a session that a restart of the server ended.
        return conn, worker.take_session(conn, conninfo.identity(env))
    except Exception:  # noqa: BLE001 - the worker connects itself instead
        with contextlib.suppress(Exception):
            conn.close()
        return None, False


def _prepend_paths(pythonpath: str) -> bool:
    """Put the folders of `pythonpath` that `sys.path` lacks first on it, and forget the modules imported
    before of the top-level packages they hold (so those are imported from there). True if it did."""
    known = {os.path.abspath(p or os.curdir) for p in sys.path}
    new = [os.path.abspath(p) for p in pythonpath.split(os.pathsep)
           if p and os.path.isdir(p) and os.path.abspath(p) not in known]
    if not new:
        return False
    sys.path[:0] = new
    tops = {name.removesuffix(".py") for folder in new for name in os.listdir(folder)}
    for name in [n for n in sys.modules if n.split(".")[0] in tops]:
        del sys.modules[name]
    importlib.invalidate_caches()
    return True


PROTOCOL_FD_ARG = "--protocol-fd"
"""`--protocol-fd=N`: the descriptor the server says its messages on (not stdout, which the agent may
print to while it is imported); stdout without it."""

BLACK_BOX_ARG = pymain.BLACK_BOX_ARG
"""`--black-box=JSON`: the server forks a black-box Python worker (`pymain`: its `script` or `module`, its
`folder`, the `modules` to preload, the `volatile` variables) instead of the reference worker, without a
standby; its `ready` line says what `pymain.preload` found."""

_said: Any = None


def _say(msg: dict) -> None:
    out = _said or sys.__stdout__
    out.write(json.dumps(msg) + "\n")
    out.flush()


PIPE_BUF_SAFE = 65536
"""A spawn command this long or longer is not written to a standby: the pipe (64 KiB on Linux) might not
hold it, and a standby still connecting would then block the server."""


@dataclass
class _Standby:
    """A child forked ahead (`_standby`) for the next spawn whose environment has `key` (`_key`)."""

    pid: int
    wfd: int
    key: tuple


def _key(env: dict[str, str]) -> tuple:
    """What a standby's session and imports depend on in an incarnation's environment: the connection
    settings (`DATABASE_URL`, libpq's `PG*` variables) with the incarnation's name taken out, and the
    import path. Two spawns with the same key can use the same standby."""
    neutral = conninfo.standby_env(env, STANDBY_NAME)
    return tuple(sorted((k, v) for k, v in neutral.items()
                        if k in ("DATABASE_URL", "PYTHONPATH") or k.startswith("PG")))


class _Server:
    """The server's state: its incarnations (`children`, each a group in `groups`) and its standby."""

    def __init__(self, standby: bool, fds: list[int], black_box: dict | None = None) -> None:
        self.use_standby = standby and black_box is None
        self.black_box = black_box  # a black-box Python worker's spec (`pymain`), or None: the reference worker
        self.fds = fds  # the server's own descriptors, closed in every child
        self.children: set[int] = set()
        self.groups: set[int] = set()
        self.standby: _Standby | None = None

    def spawn(self, cmd: dict, line: bytes) -> None:
        """Start the incarnation of `cmd`: hand it to the standby if its key matches, else fork it, and say
        `spawned`; then fork the standby of the next spawn and say `standby` (after `spawned`: the fork
        of a ~100 MB process takes milliseconds that the new incarnation need not wait for)."""
        key = _key(cmd["env"]) if self.use_standby else ()
        pid = self._hand_over(key, line)
        if pid is None:
            pid = os.fork()
            if pid == 0:
                if self.black_box is not None:
                    _black_box_child(self.black_box, cmd["argv"], cmd["env"], cmd.get("log"), self.fds)
                _child(cmd["argv"], cmd["env"], cmd.get("log"), self.fds)
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
        self.children.add(pid)
        self.groups.add(pid)
        _say({"op": "spawned", "inc": cmd["inc"], "pid": pid})
        if self.use_standby:
            self._fork_standby(cmd["env"], key)
            _say({"op": "standby", "pid": self.standby.pid if self.standby else None})

    def _hand_over(self, key: tuple, line: bytes) -> int | None:
        """The standby's pid once it has the command `line`, or None (no standby, another key, or it died:
        then it is dropped)."""
        standby, self.standby = self.standby, None
        if standby is None:
            return None
        try:
            # Not for another session's settings, nor for more than the pipe holds at once.
            if standby.key == key and len(line) < PIPE_BUF_SAFE:
                os.set_blocking(standby.wfd, True)
                os.write(standby.wfd, line)
                return standby.pid
        except OSError:
            pass  # it died: dropped like one of other settings
        finally:
            os.close(standby.wfd)
        with contextlib.suppress(OSError):
            os.killpg(standby.pid, signal.SIGKILL)  # reaped by `_reap` like an orphan: nobody asks
        return None

    def _fork_standby(self, env: dict[str, str], key: tuple) -> None:
        """Fork the standby of the next spawn; none if the system refuses a process now (the next spawn
        then forks, and meets the refusal itself)."""
        try:
            rfd, wfd = os.pipe()
        except OSError:
            return
        try:
            pid = os.fork()
        except OSError:
            os.close(rfd)
            os.close(wfd)
            return
        if pid == 0:
            _standby(env, rfd, [*self.fds, wfd])
        os.close(rfd)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        self.groups.add(pid)
        self.standby = _Standby(pid, wfd, key)

    def ended(self, pid: int) -> None:
        """`pid` (no incarnation) was reaped: if it was the standby, there is none now."""
        if self.standby is not None and self.standby.pid == pid:
            with contextlib.suppress(OSError):
                os.close(self.standby.wfd)
            self.standby = None


AGENT_SDKS = ("anthropic", "openai", "stripe")
"""`sdk_warm.SERVICE_SDKS`, named here so that a server with nothing to warm never imports sdk_warm (its
reference-agent servers import what they did before it; tests/env/test_sdk_warm.py holds the two together)."""

_server_pid = 0
"""This server's pid (`serve`): a child forked while the server was being killed ends at once (`_detach`)."""


def _probe(module: str) -> None:
    """With `--probe`: import `module` as the harness's probe does (`stepmodule.probe_report`: within the
    import limit, every way it fails said), say `{"op": "importing"}` before and `{"op": "probed", "report":
    {...}}` after, and exit at once (no atexit of the user's) if it cannot be used: the harness refuses it
    with the report. So a session imports a user's step module once less (`ForkLauncher.probe`)."""
    from killpoint.env import stepmodule  # noqa: PLC0415 - a server that checks nothing needs none of it

    _say({"op": "importing"})
    with _capturing():
        report = stepmodule.probe_report(module)
    _say({"op": "probed", "report": report})
    if not report.get("ok"):
        os._exit(0)


def _commands_off_stdin() -> int:
    """Move the harness's command pipe off descriptor 0 (to one above 2, closed on exec) and put /dev/null
    there: what the step module, or a black-box worker's library, reads from stdin while this server
    imports it is the end of input, as under `python worker.py </dev/null` (every incarnation's stdin);
    never the commands, which it would wait on until the import limit ran out (the harness writes none
    before `ready`). Returns the command pipe's descriptor."""
    commands = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    _stdin_from_devnull()
    return commands


def serve(modules: list[str], standby: bool = True, black_box: dict | None = None, probe: bool = False) -> int:
    global _server_pid
    commands = _commands_off_stdin()
    _server_pid = os.getpid()
    # SIGTERM, not SIGKILL, when the harness dies: the server then kills the groups it made (a worker's own
    # parent-death signal does not reach the processes the worker started) before it exits.
    die_with_parent(signal.SIGTERM)
    stopping: list[int] = []

    def on_term(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    become_subreaper()
    egress.install_from_env()  # before the agent is imported: its import-time connections are checked too
    lazy_tls.install()  # an incarnation's SDK clients parse no CA bundle unless they make a TLS handshake
    ready: dict = {}
    if black_box is not None:  # a black-box Python worker: its libraries, checked (harness/env/pymain.py)
        _say({"op": "importing"})  # again at each of the preload's restarts: each is bounded on its own
        ready = pymain.preload(black_box, commands)
        signal.signal(signal.SIGTERM, on_term)  # a library's own handler is its children's (`pymain`, 3.)
        if ready["unsafe"] is None:  # else every incarnation is exec'd: nothing here would reach them
            from killpoint.env import sdk_warm  # noqa: PLC0415 - only where there is something to warm

            ready["warmed"] = sdk_warm.warm()
        gc.collect()
        gc.freeze()
    else:
        if probe and modules:  # the harness's check of the step module is this import (`_probe`)
            _probe(modules[0])
        with _capturing():  # what a fresh worker's import prints: every incarnation's log says it (`_take`)
            agents = [importlib.import_module(name) for name in modules]
        importlib.import_module("killpoint.reference_agent.worker").parser()
        ready["sdk"] = _warm(agents)
        warm = sys.modules.get("killpoint.env.sdk_warm")  # imported where there was something to warm
        ready["warmed"] = warm.warmed() if warm else []
    huge_heap()  # what is preloaded now is what every fork copies the page tables of
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness decides when we stop
    # A black-box worker's server learns what its incarnations import lazily (harness/env/preload_learning.py).
    learner = preload_learning.Learner(black_box, ready["reads"]) \
        if black_box is not None and ready["unsafe"] is None else None
    watched = [commands, rfd, *([learner.rfd] if learner else [])]
    server = _Server(standby, [rfd, wfd, commands, *([_said.fileno()] if _said else []),
                               *([learner.rfd] if learner else [])], black_box)
    if learner:
        learner.arm()
    buf = b""
    me = os.getpid()
    _say({"op": "ready", "pid": me, **ready})
    try:
        while not stopping:
            if learner and (learned := learner.feed()):  # before the exits are said: a child reports, then ends
                _say(learned)
            _reap(server)
            try:
                ready, _, _ = select.select(watched, [], [])
            except InterruptedError:
                continue
            if rfd in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(rfd, 4096)
            if commands in ready:
                chunk = os.read(commands, 65536)
                if not chunk:
                    return 0
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    cmd = json.loads(line)
                    if cmd.get("op") == "spawn":
                        server.spawn(cmd, line)
        return 0
    finally:
        if os.getpid() == me:  # never in a child that a signal caught between fork and _child
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            _kill_everything(server.groups)


def _kill_everything(groups: set[int]) -> None:
    """SIGKILL every descendant of this process (each group of ours at once, then every process by pid),
    wait until they are gone, and reap every child, adopted ones included."""
    for _ in range(5):
        try:
            procs = psutil.Process().children(recursive=True)
        except psutil.Error:
            procs = []
        live = [p for p in procs if _running(p)]
        if not live:
            break
        for group in {pgid(p.pid) for p in live} & groups:  # a live member: the group is still ours
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        for p in live:
            with contextlib.suppress(psutil.Error):
                p.kill()
        wait_gone(live, 5.0)
        _reap_all()
    _reap_all()


def _reap_all() -> None:
    """Reap every child that has ended (a dead worker's descendants are re-parented here, the subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _warm(agents: list[Any]) -> bool:
    """Do once here what every child would otherwise do on its own: httpx2 imports its transport stack
    (httpcore2, anyio, trio: ~0.3 s) only when the first client is made, and the SDK builds its response
    types' schemas on its first call (~30 ms of CPU), which the worker does per process; the reference
    agent's `worker.warm` does both (and more: its docstring) without a socket or a thread, and builds one
    worker's HTTP clients ahead. The SDK (~1 s to import, ~50 MB in every child) only if a step of `agents`
    may call the model (`worker.warm`); whether this process holds the SDK is returned. A model SDK the
    agents imported themselves (before `worker.warm` runs) gets every call its fake answers made here
    (`sdk_warm.warm`): the runtime's one call is not what an agent that calls the SDK itself makes.
    Then every object made so far is frozen out of the garbage collector's reach: a child's collections
    neither walk nor write to the pages it shares with this server (copy-on-write)."""
    imported = [name for name in AGENT_SDKS if name in sys.modules]  # by the agents (or a zygote)
    try:
        import httpx2  # noqa: PLC0415 - the reference runtime's HTTP client
    except ImportError:
        return "anthropic" in sys.modules
    httpx2.Client().close()
    with contextlib.suppress(Exception):  # warming only saves time: a failure here costs the children time
        from killpoint.reference_agent import worker  # noqa: PLC0415

        worker.warm(agents)
    if imported:  # an SDK the agents call themselves: all its faked calls (the runtime's is one)
        from killpoint.env import sdk_warm  # noqa: PLC0415 - the reference agent's servers never import it

        sdk_warm.warm(imported)
    gc.collect()
    gc.freeze()
    return "anthropic" in sys.modules


def _reap(server: _Server) -> None:
    """Collect every state change of our children; report those of incarnations (adopted orphans and
    standbys are only reaped: nobody asked about them)."""
    children = server.children
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid not in children:
            if not (os.WIFSTOPPED(status) or os.WIFCONTINUED(status)):
                server.ended(pid)
            continue
        if os.WIFSTOPPED(status):
            _say({"op": "stopped", "pid": pid})
        elif os.WIFCONTINUED(status):
            _say({"op": "continued", "pid": pid})
        else:
            children.discard(pid)
            code, sig = decode_status(status)
            _say({"op": "exited", "pid": pid, "exit_code": code, "signal": sig,
                  "cpu": round(usage.ru_utime + usage.ru_stime, 6)})


def main(argv: list[str]) -> int:
    """`python -m killpoint.env.forkserver ARGS` (the module docstring says what ARGS hold); its exit code.
    A zygote's child calls it too (harness/env/zygote.py)."""
    global _said
    args = list(argv)
    for arg in [a for a in args if a.startswith(PROTOCOL_FD_ARG + "=")]:
        _said = os.fdopen(int(arg.partition("=")[2]), "w")
        args.remove(arg)
    spec = None
    for arg in [a for a in args if a.startswith(BLACK_BOX_ARG + "=")]:
        spec = json.loads(arg.partition("=")[2])
        args.remove(arg)
    return serve([a for a in args if a not in ("--no-standby", "--probe")], standby="--no-standby" not in args,
                 black_box=spec, probe="--probe" in args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
