"""Launchers start worker incarnations and report how each one ends.

`ForkLauncher` asks a fork server (harness/forkserver.py) that has already imported the agent;
`ExecLauncher` starts a fresh interpreter (`--spawn exec`) or any command (`--worker-cmd`). Both give
back an `Incarnation` whose `ended` event is set when the process is gone, with its exit code or
signal, and whose `stopped` event follows SIGSTOP/SIGCONT as the kernel reports them.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from killpoint.errors import EnvironmentProblem
from killpoint.env.procutil import decode_status, die_with_parent


@dataclass
class Incarnation:
    """One worker process.

    When it ends, `exit_code`/`signal` and `exited` are set first, then the launcher's `on_exit` runs
    (the history records the end), and only then is `ended` set: whoever waits on `ended` finds the end
    already recorded, and whoever `on_exit` wakes already sees `alive()` False.
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

    def alive(self) -> bool:
        return not self.exited

    def send(self, sig: int) -> bool:
        """Signal the process if it still runs; False if it was already gone."""
        if self.exited:
            return False
        try:
            os.kill(self.pid, sig)
            return True
        except ProcessLookupError:
            return False


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

    def _started(self, incarnation: Incarnation) -> None:
        if self.on_start:
            self.on_start(incarnation)

    def _finish(self, incarnation: Incarnation, code: int | None, sig: int | None) -> None:
        incarnation.exit_code, incarnation.signal = code, sig
        incarnation.exited = True
        incarnation.stopped.clear()
        try:
            if self.on_exit:
                self.on_exit(incarnation)
        finally:
            incarnation.ended.set()


class ForkLauncher(Launcher):
    """Incarnations forked from a fork server that preloaded `modules` (a few ms each)."""

    def __init__(self, modules: list[str], env: dict[str, str] | None = None) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "killpoint.env.forkserver", *modules],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, process_group=0, preexec_fn=die_with_parent,
        )
        self._by_pid: dict[int, Incarnation] = {}
        self._early: dict[int, list[dict]] = {}
        self._spawned: queue.Queue[dict] = queue.Queue()
        self._lock = threading.Lock()  # guards _by_pid and _early
        self._spawn_lock = threading.Lock()  # one spawn request in flight at a time
        assert self._proc.stdout is not None
        first = self._proc.stdout.readline()
        if not first:
            err = self._proc.stderr.read().decode(errors="replace").strip().splitlines() if self._proc.stderr else []
            self._proc.wait()
            raise EnvironmentProblem("forkserver-failed",
                                     f"the fork server could not import the agent: {err[-1] if err else 'no output'}",
                                     "run `python -m killpoint.reference_agent.worker --help` to see the import error, or use --spawn exec")
        self.server_pid = json.loads(first)["pid"]
        self._reader = threading.Thread(target=self._read, name="killpoint-forkserver", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            msg = json.loads(line)
            op = msg.get("op")
            if op == "spawned":
                self._spawned.put(msg)
                continue
            with self._lock:
                incarnation = self._by_pid.get(msg.get("pid"))
                if incarnation is None:  # reported before spawn() registered it
                    self._early.setdefault(msg.get("pid"), []).append(msg)
                    continue
            self._apply(incarnation, msg)

    def _apply(self, incarnation: Incarnation, msg: dict) -> None:
        op = msg.get("op")
        if op == "stopped":
            incarnation.continued.clear()
            incarnation.stopped.set()
        elif op == "continued":
            incarnation.stopped.clear()
            incarnation.continued.set()
        elif op == "exited":
            self._finish(incarnation, msg.get("exit_code"), msg.get("signal"))

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None) -> Incarnation:
        assert self._proc.stdin is not None
        incarnation = Incarnation(inc=inc, run_id=run_id, role=role, log=log)
        with self._spawn_lock:
            self._proc.stdin.write((json.dumps({"op": "spawn", "inc": inc, "argv": argv, "env": env,
                                                "log": log}) + "\n").encode())
            self._proc.stdin.flush()
            msg = self._spawned.get(timeout=30)
        incarnation.pid = msg["pid"]
        self._started(incarnation)  # before its exit, which may already be waiting in _early
        with self._lock:
            self._by_pid[incarnation.pid] = incarnation
            early = self._early.pop(incarnation.pid, [])
        for m in early:
            self._apply(incarnation, m)
        return incarnation

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._proc.stdin:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        self._reader.join(timeout=5)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream:
                stream.close()
        with self._lock:
            for incarnation in self._by_pid.values():
                if not incarnation.exited:
                    self._finish(incarnation, None, signal.SIGKILL)


class ExecLauncher(Launcher):
    """Incarnations as fresh processes: `python -m killpoint.reference_agent.worker` or a user's `--worker-cmd`.

    `command` is an argv template; `{run_id}` in it is replaced. Processes are started from one
    long-lived thread, because Linux's parent-death signal follows the thread that forked.
    """

    def __init__(self, command: list[str] | None = None) -> None:
        self._command = command
        self._jobs: queue.Queue = queue.Queue()
        self._procs: list[tuple[subprocess.Popen, Incarnation]] = []
        self._lock = threading.Lock()
        self._spawner = threading.Thread(target=self._spawn_loop, name="killpoint-spawner", daemon=True)
        self._spawner.start()

    @classmethod
    def from_shell(cls, worker_cmd: str) -> ExecLauncher:
        return cls(shlex.split(worker_cmd))

    def _spawn_loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            argv, env, log, reply = job
            try:
                out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                        process_group=0, preexec_fn=die_with_parent)
                if log:
                    out.close()
                reply.put(proc)
            except OSError as exc:
                reply.put(exc)

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None) -> Incarnation:
        if self._command is None:
            full = [sys.executable, "-m", "killpoint.reference_agent.worker", *argv]
        else:
            full = [part.replace("{run_id}", run_id) for part in self._command]
        reply: queue.Queue = queue.Queue()
        self._jobs.put((full, env, log, reply))
        proc = reply.get()
        if isinstance(proc, OSError):
            raise EnvironmentProblem("worker-cmd", f"cannot start worker {full[0]!r}: {proc.strerror}",
                                     "check --worker-cmd names an executable on PATH")
        incarnation = Incarnation(inc=inc, run_id=run_id, role=role, pid=proc.pid, log=log)
        self._started(incarnation)  # before the thread that reports its exit
        with self._lock:
            self._procs.append((proc, incarnation))
        threading.Thread(target=self._wait, args=(proc, incarnation), daemon=True).start()
        return incarnation

    def _wait(self, proc: subprocess.Popen, incarnation: Incarnation) -> None:
        while True:
            try:
                _, status = os.waitpid(proc.pid, os.WUNTRACED | os.WCONTINUED)
            except ChildProcessError:
                self._finish(incarnation, proc.returncode, None)
                return
            if os.WIFSTOPPED(status):
                incarnation.continued.clear()
                incarnation.stopped.set()
            elif os.WIFCONTINUED(status):
                incarnation.stopped.clear()
                incarnation.continued.set()
            else:
                code, sig = decode_status(status)
                proc.returncode = code if code is not None else -(sig or 0)
                self._finish(incarnation, code, sig)
                return

    def close(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for _proc, incarnation in procs:
            if incarnation.alive():
                incarnation.send(signal.SIGKILL)
                incarnation.send(signal.SIGCONT)
        for _, incarnation in procs:
            incarnation.ended.wait(timeout=10)
        self._jobs.put(None)
        self._spawner.join(timeout=5)
