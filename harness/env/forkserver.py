"""The fork server: a process that has already imported the agent, and forks incarnations on request.

`import anthropic` alone costs about a second; a fork from a process that imported it costs a few
milliseconds. Run as `python -m killpoint.env.forkserver MODULE [MODULE...]`; it imports the modules, says
`{"op": "ready"}` on stdout, then reads JSON commands on stdin, one per line:

    {"op": "spawn", "inc": "w3", "argv": ["RUN_ID"], "env": {...}, "log": "/path/w3.log"}

and answers `{"op": "spawned", "inc": "w3", "pid": N}`. It reports every child's state change:
`{"op": "stopped"|"continued", "pid": N}` and `{"op": "exited", "pid": N, "exit_code": C, "signal": S}`.
A child runs `killpoint.reference_agent.worker.main(argv)` with exactly `env` as its environment and exits
with its return value. On stdin EOF (the harness is gone or done) it SIGKILLs its children and exits.
The server is single-threaded on purpose: forking a multi-threaded process can inherit held locks.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import sys
import traceback

from killpoint.env.procutil import decode_status, die_with_parent


def _child(argv: list[str], env: dict[str, str], log: str | None, fds: list[int]) -> None:
    """In the forked child: become the worker. Never returns."""
    code = 1
    try:
        die_with_parent()
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        if log:
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(out, 1)
            os.dup2(out, 2)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(env)
        from killpoint.reference_agent import worker

        code = int(worker.main(argv) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _say(msg: dict) -> None:
    sys.__stdout__.write(json.dumps(msg) + "\n")
    sys.__stdout__.flush()


def serve(modules: list[str]) -> int:
    die_with_parent()
    for name in modules:
        importlib.import_module(name)
    importlib.import_module("killpoint.reference_agent.worker")
    _warm()
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness decides when we stop
    children: set[int] = set()
    stdin = sys.stdin.buffer
    buf = b""
    _say({"op": "ready", "pid": os.getpid()})
    try:
        while True:
            _reap(children)
            try:
                ready, _, _ = select.select([stdin, rfd], [], [])
            except InterruptedError:
                continue
            if rfd in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(rfd, 4096)
            if stdin in ready:
                chunk = os.read(stdin.fileno(), 65536)
                if not chunk:
                    return 0
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    cmd = json.loads(line)
                    if cmd.get("op") == "spawn":
                        pid = os.fork()
                        if pid == 0:
                            _child(cmd["argv"], cmd["env"], cmd.get("log"), [rfd, wfd, stdin.fileno()])
                        children.add(pid)
                        _say({"op": "spawned", "inc": cmd["inc"], "pid": pid})
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _warm() -> None:
    """Do once here what every child would otherwise do on its own: httpx2 imports its transport stack
    (httpcore2, anyio, trio: ~0.3 s) only when the first client is made, which the worker does per
    process. Making and closing one client starts no thread and opens no socket."""
    try:
        import httpx2  # noqa: PLC0415 - the reference runtime's HTTP client
    except ImportError:
        return
    httpx2.Client().close()


def _reap(children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if os.WIFSTOPPED(status):
            _say({"op": "stopped", "pid": pid})
        elif os.WIFCONTINUED(status):
            _say({"op": "continued", "pid": pid})
        else:
            children.discard(pid)
            code, sig = decode_status(status)
            _say({"op": "exited", "pid": pid, "exit_code": code, "signal": sig})


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
