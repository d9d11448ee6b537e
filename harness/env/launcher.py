"""Launchers start worker incarnations and report how each one ends.

`ForkLauncher` asks one of its fork servers (harness/env/forkserver.py, one per hash seed, used in turn by
the incarnations of a run) that have already imported the agent;
`ExecLauncher` starts a fresh interpreter (`--spawn exec`) or any command (`--worker-cmd`). Both give
back an `Incarnation` whose `ended` event is set when the process is gone, with its exit code or
signal, and whose `stopped` event follows SIGSTOP/SIGCONT as the kernel reports them.

Process groups. Every incarnation is the leader of its own process group (pgid = its pid), so whatever it
starts (a forked child, a shell's `sleep &`) is in that group too. `Incarnation.send` delivers SIGKILL,
SIGSTOP and SIGCONT to the whole group: a killed or frozen worker takes its helpers with it, as a killed or
frozen container does. SIGTERM goes to the leader only, as Kubernetes and `docker stop` deliver it to a
container's PID 1: forwarding it is the worker's job, and the SIGKILL that ends the grace period then takes
the whole group, like the kubelet's final kill. `Launcher.close()` kills every group and every straggler.

A process can leave its group (`setsid`, `setpgid`). Such an escapee is still found: while its parent chain
up to the incarnation lives it is a descendant; once that chain is gone, an exec'd escapee still carries the
incarnation's tag (`KILLPOINT_PROCESS_TAG`, set in the worker's environment by the launcher) in its
`/proc/PID/environ`; and the fork server is a child subreaper, so a forked escapee whose parents died is
adopted by it (not by init), charged to every incarnation of that server alive when it was created, and
killed when the server stops. `Incarnation.leftovers()` lists all of these; `kill_all()` ends them.

Limits: no cgroups are used. Under `ExecLauncher` an escapee that also drops the tag from its environment
and outlives its parents goes to init unseen; and if the harness itself is SIGKILLed, an exec'd worker dies
by its parent-death signal but what it started lives on (a fork server, told by its own parent-death signal,
kills its groups first).
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
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from killpoint.env import vitals
from killpoint.env.procutil import decode_status, describe, die_with_parent, wait_gone
from killpoint.errors import EnvironmentProblem

TAG_VAR = "KILLPOINT_PROCESS_TAG"
"""The environment variable holding an incarnation's unique tag; every process it execs inherits it."""
GROUP_SIGNALS = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT})
"""The signals `Incarnation.send` delivers to the whole process group by default (see the module doc)."""
KILL_ROUNDS = 5


@dataclass
class Incarnation:
    """One worker process, leader of its own process group.

    When it ends, `exit_code`/`signal` and `exited` are set first, then the launcher's `on_exit` runs
    (the history records the end), and only then is `ended` set: whoever waits on `ended` finds the end
    already recorded, and whoever `on_exit` wakes already sees `alive()` False.

    `pgid` is its process group (0: it has none of its own, signals go to `pid` only), `tag` the value of
    `TAG_VAR` in its environment, `since` a time (epoch seconds) before it was started, `leader_ctime`
    the leader's create time (None if it was gone before it could be read), `ended_at` when its end was
    reported, `cpu` the leader's own user + system CPU seconds (forked incarnations: the fork server reads
    them when it reaps the leader; else None), and `adopter` (fork server only) lists the orphans the fork server adopted: those created
    while this incarnation lived are counted as its own.
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
    pgid: int = 0
    tag: str = ""
    since: float = 0.0
    leader_ctime: float | None = None
    ended_at: float | None = None
    cpu: float | None = None
    adopter: Callable[[], list[psutil.Process]] | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        return not self.exited

    def end_fields(self) -> dict[str, Any]:
        """What its `inc.end` event records: its id, how it ended, and its CPU when known."""
        return {"inc": self.inc, "exit_code": self.exit_code, "signal": self.signal,
                **({"cpu": self.cpu} if self.cpu is not None else {})}

    def send(self, sig: int, group: bool | None = None) -> bool:
        """Signal the incarnation if its leader still runs; False if it was already gone.

        `group` None: SIGKILL, SIGSTOP and SIGCONT go to the whole process group, any other signal (SIGTERM)
        to the leader only; True/False force either."""
        if self.exited:
            return False
        if group is None:
            group = sig in GROUP_SIGNALS
        try:
            if group and self.pgid:
                os.killpg(self.pgid, sig)
            else:
                os.kill(self.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def leftovers(self) -> list[str]:
        """Every process of this incarnation still alive (zombies excluded), as `pid N (command line)`:
        its process group (the leader too, if it still runs), its descendants, and the escapees that carry
        its tag (see the module doc). Empty once everything it started has ended."""
        return [describe(p) for p in _members([self]).get(id(self), [])]

    def kill_all(self, timeout: float = 10.0) -> list[str]:
        """SIGKILL everything `leftovers()` finds (the group at once, then each straggler) and wait until
        it is gone; return what was killed (as `leftovers()` words it)."""
        return kill_all([self], timeout)


def leftovers(incs: list[Incarnation]) -> list[str]:
    """`Incarnation.leftovers` of every incarnation of `incs`, from one pass over the process table (a pass
    costs milliseconds per hundred processes: once per run, not once per incarnation), or from none when
    `surely_gone` can tell without one."""
    if surely_gone(incs):
        return []
    found = _members(incs)
    return [describe(p) for inc in incs for p in found.get(id(inc), [])]


def surely_gone(incs: list[Incarnation]) -> bool:
    """True when nothing of forked `incs` can be alive, known without a pass over the process table: every
    one has ended, its process group is empty, and its fork server has adopted nobody. A descendant that
    left the group has, while its parents live, an ancestor in the group or adopted by the server, and
    once they died it was adopted by the server (a child subreaper) itself. False means "look closer":
    an exec'd incarnation (no subreaper adopts its orphans), a live group member (or a group number
    reused by another process), or an orphan of any incarnation of the server."""
    adopters: dict[int, Callable[[], list[psutil.Process]]] = {}
    for inc in incs:
        if not inc.pid:
            continue
        if not inc.exited or inc.adopter is None or not inc.pgid:
            return False
        try:
            os.killpg(inc.pgid, 0)
            return False
        except ProcessLookupError:
            pass
        except OSError:
            return False
        adopters.setdefault(id(getattr(inc.adopter, "__self__", inc.adopter)), inc.adopter)
    return not any(adopter() for adopter in adopters.values())


def _children(pid: int) -> list[int] | None:
    """The pids of `pid`'s children as the kernel lists them (`/proc/PID/task/TID/children`: no pass over
    the process table); None where it does not."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(word) for word in f.read().split()]
        except FileNotFoundError:
            if not os.path.isdir(f"/proc/{pid}/task/{tid}"):
                continue  # that thread ended
            return None  # a kernel without CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return out


def _members(incs: list[Incarnation]) -> dict[int, list[psutil.Process]]:
    """One pass over the process table: `id(incarnation)` -> its live processes (see `leftovers`).

    A group counts only while it is provably the incarnation's: its number is not the pid of another
    process (a reused pid may lead a new, unrelated group of the same number)."""
    incs = [i for i in incs if i.pid]
    out: dict[int, list[psutil.Process]] = {id(i): [] for i in incs}
    if not incs:
        return out
    me = os.getpid()
    table: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["ppid", "create_time", "status"]):
        if proc.info["create_time"] is not None:
            table[proc.pid] = proc

    def is_leader(inc: Incarnation, pid: int) -> bool:
        proc = table.get(pid)
        if proc is None or pid != inc.pid:
            return False
        if inc.leader_ctime is None:  # not identified at start (gone at once, or made by hand): trust the pid
            return not inc.exited
        return abs(proc.info["create_time"] - inc.leader_ctime) < 0.01

    groups = {}
    for inc in incs:
        if inc.pgid and (inc.pgid not in table or is_leader(inc, inc.pgid)):
            groups[inc.pgid] = inc
    leaders = {inc.pid: inc for inc in incs if is_leader(inc, inc.pid)}
    tags = {inc.tag: inc for inc in incs if inc.tag}
    since = min(inc.since for inc in incs) - 1.0  # create times are rounded to clock ticks
    for pid, proc in table.items():
        if pid == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        owner = None
        with contextlib.suppress(OSError):
            owner = groups.get(os.getpgid(pid))
        if owner is None:
            if pid in leaders:
                owner = leaders[pid]
            else:
                up, hops = proc.info["ppid"], 0
                while up and up in table and hops < 256:
                    if up in leaders:
                        owner = leaders[up]
                        break
                    up, hops = table[up].info["ppid"], hops + 1
        if owner is None and tags and proc.info["create_time"] >= since:
            with contextlib.suppress(psutil.Error):
                owner = tags.get(proc.environ().get(TAG_VAR, ""))
        if owner is not None:
            out[id(owner)].append(proc)
    _charge_adopted(incs, out)
    return out


def _charge_adopted(incs: list[Incarnation], out: dict[int, list[psutil.Process]]) -> None:
    """Charge each orphan a fork server adopted, and no group, descendant line or tag claims, to every
    incarnation of that server alive when the orphan was created (it cannot tell which one made it)."""
    claimed = {p.pid for procs in out.values() for p in procs}
    seen: dict[int, list[psutil.Process]] = {}
    for inc in incs:
        if inc.adopter is None or inc.leader_ctime is None:
            continue
        key = id(getattr(inc.adopter, "__self__", inc.adopter))  # one call per fork server
        if key not in seen:
            seen[key] = inc.adopter()
        # both ends in psutil's clock (create times): shift the reported end by the offset seen at start
        end = None if inc.ended_at is None else inc.ended_at + (inc.leader_ctime - inc.since) + 0.05
        for proc in seen[key]:
            with contextlib.suppress(psutil.Error):
                ctime = proc.create_time()
                if proc.pid not in claimed and ctime >= inc.leader_ctime and (end is None or ctime <= end):
                    out[id(inc)].append(proc)


def kill_all(incs: list[Incarnation], timeout: float = 10.0) -> list[str]:
    """SIGKILL every live process of `incs` (see `Incarnation.leftovers`): each group at once, then every
    straggler by pid, again until none is found (a process may fork while it is being killed). Waits until
    they are gone; returns what was killed."""
    killed: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    for _ in range(KILL_ROUNDS):
        found = _members(incs)
        procs = [p for inc in incs for p in found[id(inc)]]
        if not procs:
            break
        for p in procs:
            killed.setdefault(p.pid, describe(p))
        for inc in incs:
            in_group = []
            for p in found[id(inc)]:
                with contextlib.suppress(OSError):
                    if inc.pgid and os.getpgid(p.pid) == inc.pgid:
                        in_group.append(p)
            if in_group:  # a live member holds the group's number: it cannot be another group's
                with contextlib.suppress(OSError):
                    os.killpg(inc.pgid, signal.SIGKILL)
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.kill()  # psutil checks the pid still names the same process
        wait_gone(procs, max(0.1, deadline - time.monotonic()))
    return list(killed.values())


def _new(inc: str, run_id: str, role: str, log: str | None) -> Incarnation:
    return Incarnation(inc=inc, run_id=run_id, role=role, log=log, tag=uuid.uuid4().hex, since=time.time())


def _identify(incarnation: Incarnation) -> None:
    """Record the new leader's create time (to tell it from a later process that reuses its pid)."""
    incarnation.pgid = incarnation.pid
    with contextlib.suppress(psutil.Error):
        incarnation.leader_ctime = psutil.Process(incarnation.pid).create_time()


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
        incarnation.ended_at = time.time()
        incarnation.exited = True
        incarnation.stopped.clear()
        try:
            if self.on_exit:
                self.on_exit(incarnation)
        finally:
            incarnation.ended.set()


HASH_SEEDS: tuple[int, ...] = (2029, 7411)
"""The `PYTHONHASHSEED`s incarnations are started with, in turn: the n-th incarnation of a run gets
`HASH_SEEDS[n % len(HASH_SEEDS)]`. Fixed values (same schedule, same verdict on any machine) that differ from
one incarnation of a run to the next, as two real restarts differ: a key built with `hash()` changes on
resume (never 0, which would turn hash randomisation off)."""


class IncarnationSeeds:
    """Hands out the hash seed of each new incarnation of a run (see `HASH_SEEDS`).

    1. `next(run_id)` counts the incarnations asked for `run_id` so far (0 for the first).
    2. It returns that count modulo the number of seeds: an index into `HASH_SEEDS` (the fork server to use,
       or the seed an exec'd worker is given), so a resumed incarnation never shares the hash seed of the
       one it replaces, and the first incarnation of every run (the crash-free run's too) gets the first.
    Thread-safe.
    """

    def __init__(self, count: int | None = None) -> None:
        self._count = len(HASH_SEEDS) if count is None else count
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def next(self, run_id: str) -> int:
        with self._lock:
            n = self._seen.get(run_id, 0)
            self._seen[run_id] = n + 1
        return n % self._count


class _ForkServer:
    """One fork server process (harness/env/forkserver.py) and the thread that reads what it says."""

    def __init__(self, modules: list[str], env: dict[str, str], on_message: Callable[[dict], None],
                 standby: bool = True) -> None:
        self._standby_on = standby
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "killpoint.env.forkserver", *modules, *([] if standby else ["--no-standby"])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, process_group=0, preexec_fn=die_with_parent,
        )
        self._on_message = on_message
        self.spawned: queue.Queue[dict] = queue.Queue()
        self.spawn_lock = threading.Lock()  # one spawn request in flight at a time
        self.leaders: set[int] = set()  # every pid this server forked for us (under spawn_lock)
        self.standby: int | None = None  # the child it keeps forked ahead for the next spawn
        self._standby_said = threading.Condition()  # `standby` follows each `spawned`: until it came, ...
        self._standby_due = 0  # ... a child of the server that is no leader may be the new standby
        self.pid = 0
        self._reader: threading.Thread | None = None
        self._live: set[int] = set()  # forked and not yet reported exited (by the reader thread)
        self._closing = False
        self.death: str | None = None
        """How the server died while in use (killed from outside: `killpoint.env.vitals`), else None."""

    def ready(self) -> None:
        """Wait for the server's `ready` line (it has imported the agent) and start reading its messages."""
        assert self._proc.stdout is not None
        first = self._proc.stdout.readline()
        if not first:
            err = self._proc.stderr.read().decode(errors="replace").strip().splitlines() if self._proc.stderr else []
            self._proc.wait()
            raise EnvironmentProblem("forkserver-failed",
                                     f"the fork server could not import the agent: {err[-1] if err else 'no output'}",
                                     "run `python -m killpoint.reference_agent.worker --help` to see the import error, or use --spawn exec")
        self.pid = json.loads(first)["pid"]
        self._reader = threading.Thread(target=self._read, name="killpoint-forkserver", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
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
                msg = {"op": "gone"} if self.death else self.spawned.get(timeout=30)
            except OSError:  # the pipe broke: the server is dead (its reader says how)
                msg = {"op": "gone"}
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

    def adopted(self) -> list[psutil.Process]:
        """Live processes this server adopted as a subreaper (see `ForkLauncher.adopted`)."""
        with self.spawn_lock, self._standby_said:  # no fork in flight, the standby known: every other child was adopted
            self._standby_said.wait_for(lambda: self._standby_due <= 0 or self.death is not None, timeout=10)
            leaders = {*self.leaders, self.standby}
            pids = _children(self.pid) if self.pid else []
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
        for kid in kids:
            if kid.pid in leaders:
                continue
            with contextlib.suppress(psutil.Error):
                out += [p for p in [kid, *kid.children(recursive=True)] if p.status() != psutil.STATUS_ZOMBIE]
        return out

    def close(self) -> None:
        self._closing = True
        if self._reader is None and self._proc.poll() is None:  # closed before it was ready: still importing
            with contextlib.suppress(OSError):
                os.killpg(self._proc.pid, signal.SIGKILL)  # it forked nothing yet; its group is itself
        with contextlib.suppress(OSError):
            if self._proc.stdin:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        for stream in (self._proc.stdout, self._proc.stderr):
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
       open (harness/env/forkserver.py, `_standby`): a spawn whose connection settings match is handed to
       it and skips the fork, the process's set-up and the connection; the standby is no incarnation and
       no orphan (`adopted` leaves it out) until a spawn names it.
    `server_pid` is the first server's pid, `server_pids` all of them.
    """

    def __init__(self, modules: list[str], env: dict[str, str] | None = None, wait: bool = True,
                 standby: bool = True) -> None:
        """Start the servers and, with `wait`, wait until they are `ready`; without, the caller calls
        `ready()` (or `close()`) later and does other work while the servers import the agent."""
        base = dict(os.environ if env is None else env)
        self._by_pid: dict[int, Incarnation] = {}
        self._early: dict[int, list[dict]] = {}
        self._lock = threading.Lock()  # guards _by_pid and _early
        self._servers: list[_ForkServer] = []
        self._seeds = IncarnationSeeds(len(HASH_SEEDS))
        self.server_pids: list[int] = []
        self.server_pid = 0
        try:
            for seed in HASH_SEEDS:
                self._servers.append(_ForkServer(modules, {**base, "PYTHONHASHSEED": str(seed)}, self._route,
                                                 standby))
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

    def _route(self, msg: dict) -> None:
        with self._lock:
            incarnation = self._by_pid.get(msg.get("pid"))
            if incarnation is None:  # reported before spawn() registered it
                self._early.setdefault(msg.get("pid"), []).append(msg)
                return
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
            incarnation.cpu = msg.get("cpu")
            self._finish(incarnation, msg.get("exit_code"), msg.get("signal"))

    def spawn(self, inc: str, run_id: str, role: str, argv: list[str], env: dict[str, str],
              log: str | None) -> Incarnation:
        incarnation = _new(inc, run_id, role, log)
        server = self._servers[self._seeds.next(run_id)]
        incarnation.pid = server.spawn(inc, argv, {**env, TAG_VAR: incarnation.tag}, log)
        incarnation.adopter = self.adopted
        _identify(incarnation)
        self._started(incarnation)  # before its exit, which may already be waiting in _early
        with self._lock:
            self._by_pid[incarnation.pid] = incarnation
            early = self._early.pop(incarnation.pid, [])
        for m in early:
            self._apply(incarnation, m)
        return incarnation

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


class ExecLauncher(Launcher):
    """Incarnations as fresh processes: `python -m killpoint.reference_agent.worker` or a user's `--worker-cmd`.

    `command` is an argv template; `{run_id}` in it is replaced. Each incarnation is given the
    `PYTHONHASHSEED` of `HASH_SEEDS` the fork launcher would use for it (`IncarnationSeeds`). Processes are started from one
    long-lived thread, because Linux's parent-death signal follows the thread that forked.

    A guard process (`python -m killpoint.env.launcher`, see `guard`) is told about every incarnation; when
    its stdin closes (at `close()`, or because the harness died) it kills whatever they left: a worker's
    parent-death signal does not reach what the worker started.
    """

    def __init__(self, command: list[str] | None = None) -> None:
        self._command = command
        self._seeds = IncarnationSeeds()
        self._jobs: queue.Queue = queue.Queue()
        self._procs: list[tuple[subprocess.Popen, Incarnation]] = []
        self._lock = threading.Lock()
        self._guard: subprocess.Popen | None = None
        with contextlib.suppress(OSError):
            self._guard = subprocess.Popen([sys.executable, "-m", "killpoint.env.launcher"], stdin=subprocess.PIPE,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0)
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
            # -P: the import path is the PYTHONPATH the harness gave (the project's folder, after an earlier
            # version's folder when one runs: killpoint.env.previous), not the cwd put before it
            full = [sys.executable, "-P", "-m", "killpoint.reference_agent.worker", *argv]
        else:
            full = [part.replace("{run_id}", run_id) for part in self._command]
        incarnation = _new(inc, run_id, role, log)
        reply: queue.Queue = queue.Queue()
        seed = HASH_SEEDS[self._seeds.next(run_id)]  # a fresh interpreter, but a deterministic hash seed
        self._jobs.put((full, {**env, TAG_VAR: incarnation.tag, "PYTHONHASHSEED": str(seed)}, log, reply))
        proc = reply.get()
        if isinstance(proc, OSError):
            raise EnvironmentProblem("worker-cmd", f"cannot start worker {full[0]!r}: {proc.strerror}",
                                     "check --worker-cmd names an executable on PATH")
        incarnation.pid = proc.pid  # process_group=0: the leader of its own group
        _identify(incarnation)
        self._tell_guard(incarnation)
        self._started(incarnation)  # before the thread that reports its exit
        with self._lock:
            self._procs.append((proc, incarnation))
        threading.Thread(target=self._wait, args=(proc, incarnation), daemon=True).start()
        return incarnation

    def _tell_guard(self, incarnation: Incarnation) -> None:
        if self._guard is None or self._guard.stdin is None:
            return
        ctime = "-" if incarnation.leader_ctime is None else repr(incarnation.leader_ctime)
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._guard.stdin.write(f"{incarnation.pid} {ctime} {incarnation.tag} {incarnation.since!r}\n".encode())
            self._guard.stdin.flush()

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
    """The guard of an `ExecLauncher` (run as `python -m killpoint.env.launcher`): reads one line per
    incarnation on stdin (`PID CTIME|- TAG SINCE`) and, at end of input, SIGKILLs everything they left
    (`kill_all`). Terminal signals do not reach it (it has its own process group and ignores SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    incs: list[Incarnation] = []
    for line in sys.stdin:
        with contextlib.suppress(ValueError):
            pid, ctime, tag, since = line.split()
            incs.append(Incarnation(inc="", run_id="", role="", pid=int(pid), pgid=int(pid), tag=tag,
                                    since=float(since), leader_ctime=None if ctime == "-" else float(ctime),
                                    exited=ctime == "-"))  # unidentified: never trust its pid alone
    kill_all(incs)
    return 0


if __name__ == "__main__":
    sys.exit(guard())
