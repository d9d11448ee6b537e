"""The process table, searched for what worker incarnations left: their process groups, descendants,
tagged escapees and adopted orphans; and the SIGKILL that ends them all.

Process groups. Every incarnation is the leader of its own process group (pgid = its pid), so whatever it
starts (a forked child, a shell's `sleep &`) is in that group too (harness/env/launcher.py says which
signals go to the whole group).

A process can leave its group (`setsid`, `setpgid`). Such an escapee is still found: while its parent chain
up to the incarnation lives it is a descendant; once that chain is gone, an exec'd escapee still carries the
incarnation's tag (`TAG_VAR`, set in the worker's environment by the launcher) in its `/proc/PID/environ`;
and the fork server is a child subreaper, so a forked escapee whose parents died is adopted by it (not by
init), charged to every incarnation of that server alive when it was created, and killed when the server
stops. `leftovers` lists all of these; `kill_all` ends them.

Limits: no cgroups are used. Under the exec launcher an escapee that also drops the tag from its environment
and outlives its parents goes to init unseen; and if the harness itself is SIGKILLed, an exec'd worker dies
by its parent-death signal but what it started lives on (a fork server, told by its own parent-death signal,
kills its groups first).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import psutil

from killpoint.env.procutil import describe, wait_gone

TAG_VAR = "KILLPOINT_PROCESS_TAG"
"""The environment variable holding an incarnation's unique tag; every process it execs inherits it."""
KILL_ROUNDS = 5


class Tracked(Protocol):
    """What the process table is searched by, of one incarnation (`killpoint.env.launcher.Incarnation`):
    its leader `pid` and that leader's create time `leader_ctime` (None: not identified), its group `pgid`
    (0: none), its `tag`, `since` (epoch seconds before it started), whether it `exited` and when
    (`ended_at`), and `adopter` (the fork server's orphans, or None)."""

    pid: int
    pgid: int
    tag: str
    since: float
    leader_ctime: float | None
    exited: bool
    ended_at: float | None
    adopter: Callable[[], list[psutil.Process]] | None


def leftovers(incs: Sequence[Tracked]) -> list[str]:
    """`Incarnation.leftovers` of every one of `incs`, from one pass over the process table (a pass
    costs milliseconds per hundred processes: once per run, not once per incarnation), or from none when
    `surely_gone` can tell without one."""
    if surely_gone(incs):
        return []
    found = members(incs)
    return [describe(p) for inc in incs for p in found.get(id(inc), [])]


def surely_gone(incs: Sequence[Tracked]) -> bool:
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


def children(pid: int) -> list[int] | None:
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


def members(incs: Sequence[Tracked]) -> dict[int, list[psutil.Process]]:
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

    def is_leader(inc: Tracked, pid: int) -> bool:
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


def _charge_adopted(incs: Sequence[Tracked], out: dict[int, list[psutil.Process]]) -> None:
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


def kill_all(incs: Sequence[Tracked], timeout: float = 10.0) -> list[str]:
    """SIGKILL every live process of `incs` (see `members`): each group at once, then every
    straggler by pid, again until none is found (a process may fork while it is being killed). Waits until
    they are gone; returns what was killed."""
    killed: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    for _ in range(KILL_ROUNDS):
        found = members(incs)
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
