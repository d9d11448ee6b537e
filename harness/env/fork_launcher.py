"""The fork launcher: incarnations forked from fork servers (harness/env/forkserver.py) that have already
imported the agent, a few milliseconds each (`ForkLauncher`, below, says how).

`_ForkServer` is one server process and the thread that reads what it says: the pid of each spawn, its
standby, and every state change of its children (stopped, continued, exited), routed by the launcher to
the incarnation of that pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import psutil

from killpoint.env import proctable, timelimit, vitals, worker_clock, zygote
from killpoint.env.forkserver import BLACK_BOX_ARG, PROTOCOL_FD_ARG
from killpoint.env.launcher import HASH_SEEDS, Incarnation, IncarnationSeeds, Launcher
from killpoint.env.proctable import TAG_VAR, kill_all
from killpoint.env.procutil import dying_with_us, pgid, wait_gone
from killpoint.errors import EnvironmentProblem

if TYPE_CHECKING:
    from killpoint.env.stepmodule import AgentSpec


STDERR_TAIL = 65536
"""How much of a fork server's stderr is kept: its last line names why it could not import the agent."""


def _op(line: bytes) -> str | None:
    """The `op` of a line of the server's protocol; None for a line that is none (not a JSON object)."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg.get("op") if isinstance(msg, dict) else None


SPAWN_ANSWER_SECONDS = 30.0
"""How long a spawn waits for the fork server's `spawned` (a few milliseconds when it runs): past it the
server is stopped or starved, and the session cannot go on (`forkserver-stuck`), where it would wait
without end or end in a traceback."""


class _ForkServer:
    """One fork server process (harness/env/forkserver.py) and the thread that reads what it says."""

    def __init__(self, modules: list[str], env: dict[str, str], on_message: Callable[[dict], None],
                 standby: bool = True, black_box: dict | None = None, probe: bool = False) -> None:
        self._standby_on = standby and black_box is None
        mode = [] if black_box is None else [f"{BLACK_BOX_ARG}={json.dumps(black_box)}"]
        # The server speaks on a pipe of its own: the agent's stdout (a print at import) is not the protocol.
        args = [*modules, *([] if self._standby_on else ["--no-standby"]), *(["--probe"] if probe else []), *mode]
        rfd, wfd = os.pipe()
        try:
            # Forked by a zygote that imported the SDK already, where `env` names one (killpoint's own test
            # suite: harness/env/zygote.py); else a fresh interpreter, as always.
            self._proc: subprocess.Popen[bytes] | zygote.ZygoteProcess = (
                black_box is None and zygote.popen(
                    ["-m", "killpoint.env.forkserver", *args, f"{PROTOCOL_FD_ARG}={wfd}"], env, {wfd: wfd},
                    pipe_stdin=True, pipe_stderr=True)) or subprocess.Popen(
                [sys.executable, "-m", "killpoint.env.forkserver", *args, f"{PROTOCOL_FD_ARG}={wfd}"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(wfd,),
                env=env, process_group=0, preexec_fn=dying_with_us(),
            )
        except BaseException:
            os.close(rfd)
            raise
        finally:
            os.close(wfd)
        self._faked = worker_clock.makes_own_pair(env)  # the clock servers
        self._said = os.fdopen(rfd, "rb")
        self.modules, self.probing = modules, probe
        self._stderr_tail = b""
        """The last `STDERR_TAIL` bytes the server wrote on its stderr (`_drain`: read as they come, so that a
        module that writes much there while it is imported never blocks on a full pipe)."""
        self._drainer: threading.Thread | None = None
        if self._proc.stderr is not None:
            self._drainer = threading.Thread(target=self._drain, name="killpoint-forkserver-stderr", daemon=True)
            self._drainer.start()
        self._first: queue.Queue[bytes] = queue.Queue()
        """The lines the server says up to `ready` (or b"" at its end), read by a thread of their own
        (`_first_reader`), so that `probed` and `ready` wait for them with a time limit."""
        self._first_reader = threading.Thread(target=self._read_first, name="killpoint-forkserver-start",
                                              daemon=True)
        self._first_reader.start()
        self._on_message = on_message
        self.spawned: queue.Queue[dict] = queue.Queue()
        self.spawn_lock = threading.Lock()  # one spawn request in flight at a time
        self.leaders: set[int] = set()  # every pid this server forked for us (under spawn_lock)
        self.standby: int | None = None  # the child it keeps forked ahead for the next spawn
        self._standby_said = threading.Condition()  # `standby` follows each `spawned`: until it came, ...
        self._standby_due = 0  # ... a child of the server that is no leader may be the new standby
        self.pid = 0
        self.report: dict = {}
        """The server's `ready` line (a black-box server's preload report: harness/env/pymain.py)."""
        self._reader: threading.Thread | None = None
        self._live: set[int] = set()  # forked and not yet reported exited (by the reader thread)
        self._closing = False
        self.death: str | None = None
        """How the server died while in use (killed from outside: `killpoint.env.vitals`), else None."""

    def _kill_importing(self) -> None:
        """SIGKILL the server while it imports the agent: it forked nothing yet, so its group is itself."""
        with contextlib.suppress(OSError):
            os.killpg(self._proc.pid, signal.SIGKILL)

    def _drain(self) -> None:
        assert self._proc.stderr is not None
        with contextlib.suppress(ValueError, OSError):  # closed under us (`close`)
            while chunk := self._proc.stderr.read1(65536):  # type: ignore[attr-defined] - a BufferedReader's
                self._stderr_tail = (self._stderr_tail + chunk)[-STDERR_TAIL:]

    def _read_first(self) -> None:
        with contextlib.suppress(ValueError, OSError):  # closed under us (`close`)
            for line in self._said:
                self._first.put(line)
                if _op(line) == "ready":
                    return
        self._first.put(b"")

    def _line(self, timeout: float) -> bytes:
        """The server's next line before `ready` (b"": it ended); `queue.Empty` past `timeout`."""
        return self._first.get(timeout=timeout)

    def _ended(self, timeout: float) -> int | None:
        """The server's exit code once its pipe to us has ended before `ready`: it ended, or it closed the
        pipe and goes on, which is bounded by `timeout` as an import that runs over is (then it is killed:
        None)."""
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill_importing()
            return None

    def probed(self, limit: float) -> tuple[object, int | None]:
        """With `probe`: the server's report of its import of the step module (`forkserver._probe`) and an exit
        code as `stepmodule.from_report` reads a probe child's: 0 once it reported, the server's own if it ended
        without a report, None if it was killed for the time limit. Bounded as `stepmodule.probe` bounds its
        child: the start within `STARTUP_SECONDS`, then `limit` and `ALARM_GRACE_SECONDS` for the import. A
        server that could not start raises as `ready` does."""
        from killpoint.env.stepmodule import ALARM_GRACE_SECONDS, STARTUP_SECONDS  # noqa: PLC0415 - not before needed

        self.probing = False  # its report is read once
        try:
            said = self._line(STARTUP_SECONDS)
            if said and _op(said) == "importing":
                said = self._line(limit + ALARM_GRACE_SECONDS)
        except queue.Empty:
            self._kill_importing()
            return None, None
        if not said:
            return None, self._ended(limit + ALARM_GRACE_SECONDS)
        if _op(said) == "probed":
            return json.loads(said).get("report"), 0  # reported: how the server goes on is no part of the check
        if _op(said) is None:  # not our protocol: the module wrote on the server's pipe
            return said.decode(errors="replace"), 0
        self._first.put(said)  # it never checked what it imported: `ready` says why
        self.ready()
        return None, 0

    def ready(self) -> None:
        """Wait for the server's `ready` line (it has imported the agent) and start reading its messages.
        Bounded: each of its lines before `ready` (`importing`: it starts, or starts again, a preload) within
        `STARTUP_SECONDS` and the import limit (`timelimit.import_seconds`), else it is killed and this raises
        `forkserver-import-timeout` (an import waiting on something without end, which `python worker.py`
        would wait on as long: no session waits on it without end)."""
        from killpoint.env.stepmodule import STARTUP_SECONDS  # noqa: PLC0415 - not before needed

        limit = STARTUP_SECONDS + timelimit.import_seconds()
        what = f"the agent ({', '.join(self.modules)})" if self.modules else "the worker's libraries"
        try:
            first = self._line(limit)
            while first and _op(first) in ("importing", "probed"):
                first = self._line(limit)
        except queue.Empty:
            self._kill_importing()
            first = None
        code = self._ended(limit) if first == b"" else 0
        if first is None or code is None:
            raise EnvironmentProblem(
                "forkserver-import-timeout", f"the fork server (pid {self._proc.pid}) did not finish importing "
                f"{what} within {limit:g} s", "find what the import waits for (`python -X importtime -c 'import "
                "MODULE'`), raise KILLPOINT_IMPORT_TIMEOUT (seconds) if it is only slow, or use --spawn exec")
        if not first:
            if self._drainer is not None:
                self._drainer.join(timeout=5)  # the pipe's end follows the server's
            err = self._stderr_tail.decode(errors="replace").strip().splitlines()
            if code < 0:  # killed from outside while it imported: not an import error
                raise vitals.gone("forkserver-gone", f"the fork server (pid {self._proc.pid}) that forks the agent's "
                                  f"workers was killed by {signal.Signals(-code).name} while importing the agent",
                                  f"{vitals.FIX}, or use --spawn exec")
            raise EnvironmentProblem("forkserver-failed",
                                     f"the fork server could not import the agent: {err[-1] if err else 'no output'}",
                                     "run `python -m killpoint.reference_agent.worker --help` to see the import error, or use --spawn exec")
        if _op(first) != "ready":  # something it imported wrote on its pipe
            self._kill_importing()
            raise EnvironmentProblem("forkserver-failed", f"the fork server (pid {self._proc.pid}) wrote "
                                     f"{first[:80]!r} on its pipe to the harness while it imported {what}",
                                     "find what writes on inherited descriptors at import, or use --spawn exec")
        self.report = json.loads(first)
        self.pid = self.report["pid"]
        self._reader = threading.Thread(target=self._read, name="killpoint-forkserver", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._said:
            msg = json.loads(line)
            if msg.get("op") == "spawned":
                self._live.add(msg["pid"])
                self.spawned.put(msg)
            elif msg.get("op") == "standby":
                with self._standby_said:
                    self.standby = msg.get("pid")
                    self._standby_due -= 1
                    self._standby_said.notify_all()
            else:
                if msg.get("op") == "exited":
                    self._live.discard(msg.get("pid"))
                self._on_message(msg)
        if not self._closing:
            self._died()

    def _died(self) -> None:
        """The server ended while in use: say how, release a waiting spawn, and report its incarnations
        ended (their parent-death signal kills them with it) once they are gone, so nobody waits for them."""
        try:
            code = self._proc.wait(timeout=5)
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        except (subprocess.TimeoutExpired, ValueError):
            how = "closed its pipe"
        self.death = f"the fork server (pid {self.pid}) that forks the agent's workers {how}"
        self.spawned.put({"op": "gone"})
        with self._standby_said:
            self._standby_due = 0
            self._standby_said.notify_all()
        for pid in sorted(self._live):
            with contextlib.suppress(psutil.Error):
                wait_gone([psutil.Process(pid)], 5.0)
            self._on_message({"op": "exited", "pid": pid, "exit_code": None, "signal": int(signal.SIGKILL)})
        self._live.clear()

    def spawn(self, inc: str, argv: list[str], env: dict[str, str], log: str | None) -> int:
        """Ask for one incarnation; its pid (already the leader of its own group)."""
        assert self._proc.stdin is not None
        with self.spawn_lock:
            try:
                self._proc.stdin.write((json.dumps({"op": "spawn", "inc": inc, "argv": argv, "env": env,
                                                    "log": log}) + "\n").encode())
                self._proc.stdin.flush()
                msg = {"op": "gone"} if self.death else self.spawned.get(timeout=SPAWN_ANSWER_SECONDS)
            except OSError:  # the pipe broke: the server is dead (its reader says how)
                msg = {"op": "gone"}
            except queue.Empty:
                raise vitals.gone("forkserver-stuck", f"the fork server (pid {self.pid}) did not answer a spawn "
                                  f"within {SPAWN_ANSWER_SECONDS:g} s", "find what stopped it (`ps -o stat= -p "
                                  f"{self.pid}`: T is stopped; or a machine out of memory or CPU), then run again, "
                                  "or use --spawn exec") from None
            if msg.get("op") == "gone":
                if self._reader is not None:
                    self._reader.join(timeout=10)
                raise vitals.gone("forkserver-gone", self.death or f"the fork server (pid {self.pid}) died",
                                  f"{vitals.FIX}, or use --spawn exec")
            self.leaders.add(msg["pid"])
            if self._standby_on:
                with self._standby_said:
                    self._standby_due += 1
        return msg["pid"]

    def forget_leaders(self, pids: list[int]) -> None:
        """Drop ended incarnations' pids from `leaders` (`ForkLauncher.release`): the server reaped them, so
        they are no children of it any more, and a pid the system gives again to an orphan it adopts is not
        taken for a leader."""
        with self.spawn_lock:
            self.leaders.difference_update(pids)

    def adopted(self) -> list[psutil.Process]:
        """Live processes this server adopted as a subreaper (see `ForkLauncher.adopted`). A child still in the
        server's own process group is the server's own (a probe trying an import: harness/env/preload_learning.py),
        never an incarnation's: every incarnation and standby leads a group of its own from its fork on."""
        with self.spawn_lock, self._standby_said:  # no fork in flight, the standby known: every other child was adopted
            self._standby_said.wait_for(lambda: self._standby_due <= 0 or self.death is not None, timeout=10)
            leaders = {*self.leaders, self.standby}
            pids = proctable.children(self.pid) if self.pid else []
            kids: list[psutil.Process] = []
            try:
                if pids is None:
                    kids = psutil.Process(self.pid).children()  # a pass over the process table
            except psutil.Error:
                return []
            for pid in pids or []:
                with contextlib.suppress(psutil.Error):  # one reaped meanwhile is no orphan any more
                    kids.append(psutil.Process(pid))
        out: list[psutil.Process] = []
        own_group = pgid(self.pid)
        for kid in kids:
            if kid.pid in leaders or pgid(kid.pid) in (own_group, -1):  # -1: gone meanwhile
                continue
            with contextlib.suppress(psutil.Error):
                out += [p for p in [kid, *kid.children(recursive=True)] if p.status() != psutil.STATUS_ZOMBIE]
        return out

    def close(self) -> None:
        self._closing = True
        if self._reader is None and self._proc.poll() is None:  # closed before it was ready: still importing
            self._kill_importing()
        with contextlib.suppress(OSError):
            if self._proc.stdin:
                self._proc.stdin.close()
        if self._proc.poll() is None:  # not reaped: the pid is still the server's
            with contextlib.suppress(OSError):
                os.kill(self._proc.pid, signal.SIGCONT)  # stopped from outside, it reads its input's end once continued
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._faked:  # what libfaketime made for the server, which its forks shared (harness/env/worker_clock.py)
            worker_clock.remove_leftovers(self._proc.pid)
        for reader in (self._reader, self._first_reader, self._drainer):
            if reader is not None:
                reader.join(timeout=5)
        for stream in (self._said, self._proc.stderr):
            if stream:
                stream.close()


class ForkLauncher(Launcher):
    """Incarnations forked from fork servers that preloaded `modules` (a few ms each).

    1. One fork server per seed of `HASH_SEEDS`, each started with that `PYTHONHASHSEED` (in parallel, so
       the start costs one import of the agent, not one per server).
    2. The n-th incarnation of a run is forked by server `n % len(HASH_SEEDS)` (`IncarnationSeeds`): a
       resumed incarnation never shares the hash seed of the one it replaces, as after a real restart
       (`random` is reseeded in every fork by Python itself).
    3. Every server's state changes of its children are routed to the incarnation of that pid.
    4. With `standby` (the default), each server keeps one child forked ahead with its Postgres session
       open, its kill-point connection made and the SDK's client built (harness/env/forkserver.py,
       `_standby`): a spawn whose connection settings match is handed to it and skips the fork, the
       process's set-up and the connections; the standby is no incarnation and
       no orphan (`adopted` leaves it out) until a spawn names it.
    `server_pid` is the first server's pid, `server_pids` all of them.
    """

    def __init__(self, modules: list[str], env: dict[str, str] | None = None, wait: bool = True,
                 standby: bool = True, black_box: dict | None = None, probe: bool = False) -> None:
        """Start the servers and, with `wait`, wait until they are `ready`; without, the caller calls
        `ready()` (or `close()`) later and does other work while the servers import the agent. With
        `black_box` (harness/env/pymain.py's spec) they fork a black-box Python worker, without standby.
        With `probe`, the first server checks the first of `modules` as it imports it (`probe`)."""
        base = dict(os.environ if env is None else env)
        self._by_pid: dict[int, Incarnation] = {}
        self._early: dict[int, list[dict]] = {}
        self._lock = threading.Lock()  # guards _by_pid and _early
        self._servers: list[_ForkServer] = []
        self._seeds = IncarnationSeeds(len(HASH_SEEDS))
        self.server_pids: list[int] = []
        self.server_pid = 0
        self.on_learned: Callable[[dict], None] | None = None
        """Called (on a server's reader thread) with each `learned` line of a black-box server."""
        try:
            for seed in HASH_SEEDS:
                self._servers.append(_ForkServer(modules, {**base, "PYTHONHASHSEED": str(seed)}, self._route,
                                                 standby, black_box, probe and not self._servers))
        except BaseException:
            self.close()
            raise
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until every server has imported the agent (EnvironmentProblem if one could not); closed
        on any failure."""
        try:
            for server in self._servers:
                server.ready()
        except BaseException:
            self.close()
            raise
        self.server_pids = [server.pid for server in self._servers]
        self.server_pid = self.server_pids[0]

    def probe(self, module: str, limit: float) -> AgentSpec:
        """`stepmodule.Prober`: `module` checked by the first server's own import of it (started with
        `probe`), with the limit, reports and refusals of `stepmodule.probe`'s child, whose import it spares;
        any other module by such a child."""
        from killpoint.env import stepmodule  # noqa: PLC0415 - the harness has it loaded by now

        if not self._servers or not self._servers[0].probing or self._servers[0].modules[:1] != [module]:
            return stepmodule.probe(module, limit)
        report, code = self._servers[0].probed(limit)
        return stepmodule.from_report(module, limit, report, code)

    @property
    def reports(self) -> list[dict]:
        """Each ready server's `ready` line, in `HASH_SEEDS` order."""
        return [server.report for server in self._servers]

    def _route(self, msg: dict) -> None:
        if msg.get("op") == "learned":  # a black-box server's preload grew (harness/env/preload_learning.py)
            if self.on_learned is not None:
                self.on_learned(msg)
            return
        with self._lock:
            incarnation = self._by_pid.get(msg.get("pid"))
            if incarnation is None:  # reported before spawn() registered it
                self._early.setdefault(msg.get("pid"), []).append(msg)
                return
        self._apply(incarnation, msg)

    def _apply(self, incarnation: Incarnation, msg: dict) -> None:
        op = msg.get("op")
        if op in ("stopped", "continued"):
            self._stop_state(incarnation, op == "stopped")
        elif op == "exited":
            incarnation.cpu = msg.get("cpu")
            self._finish(incarnation, msg.get("exit_code"), msg.get("signal"))

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None, seed_index: int | None = None) -> Incarnation:
        """`seed_index`: the server to use (an index into `HASH_SEEDS`), when the caller counts a run's
        incarnations itself (harness/env/pyfork_launcher.py); else the launcher's own count."""
        incarnation = self._new(inc, run_id, role, log)
        server = self._servers[self._seeds.next(run_id) if seed_index is None else seed_index]
        incarnation.pid = server.spawn(inc, argv, {**env, TAG_VAR: incarnation.tag}, log)
        incarnation.adopter = self.adopted
        self._identify(incarnation)
        self._started(incarnation)  # before its exit, which may already be waiting in _early
        with self._lock:
            self._by_pid[incarnation.pid] = incarnation
            early = self._early.pop(incarnation.pid, [])
        for m in early:
            self._apply(incarnation, m)
        return incarnation

    def release(self, run_id: str) -> None:
        with self._lock:
            ended = [pid for pid, i in self._by_pid.items() if i.run_id == run_id and i.exited]
            for pid in ended:
                del self._by_pid[pid]
        self._seeds.forget(run_id)
        for server in self._servers:
            server.forget_leaders(ended)

    def adopted(self) -> list[psutil.Process]:
        """Live processes the fork servers adopted as subreapers (children of a server that are no
        incarnation, and their descendants): escapees whose parents died."""
        return [p for server in self._servers for p in server.adopted()]

    def died(self) -> str | None:
        """How a fork server died while in use (`killpoint.env.vitals`), or None."""
        return next((server.death for server in self._servers if server.death), None)

    def close(self) -> None:
        for server in self._servers:
            server.close()
        with self._lock:
            incarnations = list(self._by_pid.values())
        kill_all(incarnations)  # what escaped the fork servers' own clean-up (exec'd escapees)
        for incarnation in incarnations:
            if not incarnation.exited:
                self._finish(incarnation, None, signal.SIGKILL)
