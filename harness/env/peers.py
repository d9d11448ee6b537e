"""Which incarnation sent a request: the process that owns the client end of the fake's connection.

A request carries no incarnation of its own, and a worker need not say who it is. When a run has more than
one live worker (a thawed zombie beside its successor), "the worker that last reported a point" is a guess
that a scheduler can make wrong; the client socket is not. `sender` finds the live incarnation (its leader
or any of its descendants) holding a TCP socket whose local address is the request's peer address, while
the fake still holds the request open, so the socket is there to be found.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from typing import TypeVar

import psutil

from killpoint.env.launcher import Incarnation

Inc = TypeVar("Inc", bound=Incarnation)


def sender(peer: Sequence[object] | None, incs: Sequence[Inc]) -> Inc | None:
    """The incarnation of `incs` whose processes own the client socket at `peer` (`(host, port)`, as the
    fake saw it), or None if none does or `peer` is unknown.

    1. The socket's inode, from the kernel's table of TCP sockets (`/proc/net/tcp`: the row whose local
       address is `peer`), then each live incarnation's leader holding that inode among its open files:
       one table read and a few `readlink`s (~1 ms; this runs for every service request while a zombie
       is alive).
    2. Otherwise (no such row: another address family, no /proc; or a descendant of the leader holds it),
       psutil's view of every process of each incarnation and their TCP connections (tens of ms)."""
    if not peer or len(peer) < 2:
        return None
    host, port = str(peer[0]), peer[1]
    live = [inc for inc in incs if inc.pid and inc.alive()]
    inode = _inode(host, port)
    if inode is not None:
        target = f"socket:[{inode}]"
        for inc in live:
            if _holds(inc.pid, target):
                return inc
    for inc in live:
        try:
            leader = psutil.Process(inc.pid)
            procs = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in procs:
            try:
                conns = proc.net_connections(kind="tcp")
            except psutil.Error:
                continue
            if any(c.laddr and c.laddr.port == port and c.laddr.ip == host for c in conns):
                return inc
    return None


def _inode(host: str, port: object) -> int | None:
    """The inode of the open TCP socket whose local address is IPv4 `host`:`port` (/proc/net/tcp), or None."""
    try:
        addr = ipaddress.IPv4Address(host)
        local = f"{int.from_bytes(addr.packed, 'little'):08X}:{int(port):04X}"  # the kernel's byte order
        with open("/proc/net/tcp") as table:
            next(table)  # the header
            for row in table:
                fields = row.split()
                if fields[1] == local and fields[9] != "0":  # a socket in TIME_WAIT has no inode
                    return int(fields[9])
    except (ValueError, TypeError, OSError, IndexError, StopIteration):
        return None
    return None


def _holds(pid: int, target: str) -> bool:
    """Whether process `pid` has `target` ("socket:[INODE]") among its open files."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False
