"""The exec launcher: incarnations as fresh processes (`--spawn exec`, or a user's `--worker-cmd`), and the
guard process that kills what they left if the harness dies (`ExecLauncher`, below, says how).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading

from killpoint.env import egress_shim, worker_clock
from killpoint.env.launcher import HASH_SEEDS, Incarnation, IncarnationSeeds, Launcher
from killpoint.env.proctable import TAG_VAR, kill_all
from killpoint.env.procutil import decode_status, dying_with_us
from killpoint.errors import EnvironmentProblem


class ExecLauncher(Launcher):
    """Incarnations as fresh processes: `python -m killpoint.reference_agent.worker` or a user's `--worker-cmd`.

    `command` is an argv template; `{run_id}` in it is replaced. Each incarnation is given the
    `PYTHONHASHSEED` of `HASH_SEEDS` the fork launcher would use for it (`IncarnationSeeds`). Processes are started from one
    long-lived thread, because Linux's parent-death signal follows the thread that forked.

    A guard process (`python -m killpoint.env.exec_launcher`, see `guard`) is told about every incarnation; when
    its stdin closes (at `close()`, or because the harness died) it kills whatever they left: a worker's
    parent-death signal does not reach what the worker started.
    """

    def __init__(self, command: list[str] | None = None, preload_lib: str | None = None) -> None:
        self._command = command
        self._preload_lib = preload_lib  # `egress_shim.library()` for a worker-cmd that is not Python
        self._seeds = IncarnationSeeds()
        self._jobs: queue.Queue = queue.Queue()
        self._procs: list[tuple[subprocess.Popen, Incarnation]] = []
        self._lock = threading.Lock()
        self._guard: subprocess.Popen | None = None
        with contextlib.suppress(OSError):
            self._guard = subprocess.Popen([sys.executable, "-m", "killpoint.env.exec_launcher"], stdin=subprocess.PIPE,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0)
        self._spawner = threading.Thread(target=self._spawn_loop, name="killpoint-spawner", daemon=True)
        self._spawner.start()

    @classmethod
    def from_shell(cls, worker_cmd: str, preload_lib: str | None = None) -> ExecLauncher:
        return cls(shlex.split(worker_cmd), preload_lib)

    def _spawn_loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            argv, env, log, reply = job
            try:
                out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                        process_group=0, preexec_fn=dying_with_us())
                if log:
                    out.close()
                reply.put(proc)
            except OSError as exc:
                reply.put(exc)

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None, seed_index: int | None = None) -> Incarnation:
        """`seed_index`: the index into `HASH_SEEDS` of its hash seed, when the caller counts a run's
        incarnations itself (harness/env/pyfork_launcher.py); else the launcher's own count."""
        if self._command is None:
            # -P: the import path is the PYTHONPATH the harness gave (the project's folder, after an earlier
            # version's folder when one runs: killpoint.env.previous), not the cwd put before it
            # run by the egress guard's entry (killpoint.env.egress), which guards it before the agent is imported
            full = [sys.executable, "-P", "-m", "killpoint.env.egress", *argv]
        else:
            full = [part.replace("{run_id}", run_id) for part in self._command]
        incarnation = self._new(inc, run_id, role, log)
        reply: queue.Queue = queue.Queue()
        seed = HASH_SEEDS[self._seeds.next(run_id) if seed_index is None else seed_index]  # a fresh interpreter, but a deterministic hash seed
        env = {**env, TAG_VAR: incarnation.tag, "PYTHONHASHSEED": str(seed)}
        if self._preload_lib:
            env = egress_shim.preload(env, self._preload_lib)
        self._jobs.put((full, env, log, reply))
        proc = reply.get()
        if isinstance(proc, OSError):
            raise EnvironmentProblem("worker-cmd", f"cannot start worker {full[0]!r}: {proc.strerror}",
                                     "check --worker-cmd names an executable on PATH")
        incarnation.pid = proc.pid  # process_group=0: the leader of its own group
        self._identify(incarnation)
        self._tell_guard(incarnation)
        self._started(incarnation)  # before the thread that reports its exit
        with self._lock:
            self._procs.append((proc, incarnation))
        faked = worker_clock.makes_own_pair(env)
        threading.Thread(target=self._wait, args=(proc, incarnation, faked), daemon=True).start()
        return incarnation

    def _tell_guard(self, incarnation: Incarnation) -> None:
        if self._guard is None or self._guard.stdin is None:
            return
        ctime = "-" if incarnation.leader_ctime is None else repr(incarnation.leader_ctime)
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._guard.stdin.write(f"{incarnation.pid} {ctime} {incarnation.tag} {incarnation.since!r}\n".encode())
            self._guard.stdin.flush()

    def _wait(self, proc: subprocess.Popen, incarnation: Incarnation, faked: bool = False) -> None:
        """Report the incarnation's stops, continues and end; once it has ended under libfaketime (`faked`),
        remove what libfaketime left in /dev/shm for it (`worker_clock.remove_leftovers`) first."""
        while True:
            try:
                _, status = os.waitpid(proc.pid, os.WUNTRACED | os.WCONTINUED)
            except ChildProcessError:
                code, sig = proc.returncode, None
                break
            if os.WIFSTOPPED(status) or os.WIFCONTINUED(status):
                self._stop_state(incarnation, os.WIFSTOPPED(status))
                continue
            code, sig = decode_status(status)
            proc.returncode = code if code is not None else -(sig or 0)
            break
        if faked:
            worker_clock.remove_leftovers(proc.pid)
        self._finish(incarnation, code, sig)

    def release(self, run_id: str) -> None:
        with self._lock:
            kept, gone = [], []
            for proc, inc in self._procs:
                (gone if inc.run_id == run_id and inc.exited else kept).append((proc, inc))
            self._procs = kept
            if self._guard is not None and self._guard.stdin is not None and gone:
                with contextlib.suppress(OSError, ValueError):  # the guard forgets them too (`guard`)
                    self._guard.stdin.write("".join(f"- {inc.tag}\n" for _, inc in gone).encode())
                    self._guard.stdin.flush()
        self._seeds.forget(run_id)

    def close(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for _proc, incarnation in procs:
            if incarnation.alive():
                incarnation.send(signal.SIGKILL)
                incarnation.send(signal.SIGCONT)
        kill_all([incarnation for _, incarnation in procs])  # the groups of those that ended, and escapees
        for _, incarnation in procs:
            incarnation.ended.wait(timeout=10)
        self._jobs.put(None)
        self._spawner.join(timeout=5)
        guard, self._guard = self._guard, None
        if guard is not None:
            with contextlib.suppress(OSError):
                if guard.stdin:
                    guard.stdin.close()
            try:
                guard.wait(timeout=10)
            except subprocess.TimeoutExpired:
                guard.kill()
                guard.wait()


def guard() -> int:
    """The guard of an `ExecLauncher` (run as `python -m killpoint.env.exec_launcher`): reads one line per
    incarnation on stdin (`PID CTIME|- TAG SINCE`), and `- TAG` for one the launcher released (ended, and what
    it left killed when its run's evidence was read: forgotten, so a long session's guard holds its live
    incarnations, not every one it was told of); at end of input, SIGKILLs everything those it holds left
    (`kill_all`), then removes what libfaketime left in /dev/shm for each of them (`worker_clock.remove_leftovers`:
    the harness that would have is gone). Terminal signals do not reach it (it has its own process group and
    ignores SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    incs: dict[str, Incarnation] = {}
    for line in sys.stdin:
        with contextlib.suppress(ValueError):
            if line.startswith("- "):
                incs.pop(line[2:].strip(), None)
                continue
            pid, ctime, tag, since = line.split()
            incs[tag] = Incarnation(inc="", run_id="", role="", pid=int(pid), pgid=int(pid), tag=tag,
                                    since=float(since), leader_ctime=None if ctime == "-" else float(ctime),
                                    exited=ctime == "-")  # unidentified: never trust its pid alone
    kill_all(list(incs.values()))
    for inc in incs.values():
        worker_clock.remove_leftovers(inc.pid)
    return 0


if __name__ == "__main__":
    sys.exit(guard())
