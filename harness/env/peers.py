"""Which incarnation sent a request: the process that owns the client end of the fake's connection.

A request carries no incarnation of its own, and a worker need not say who it is. When a run has more than
one live worker (a thawed zombie beside its successor), "the worker that last reported a point" is a guess
that a scheduler can make wrong; the client socket is not. `sender` finds the live incarnation (its leader
or any of its descendants) holding a TCP socket whose local address is the request's peer address, while
the fake still holds the request open, so the socket is there to be found.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import psutil

from killpoint.env.launcher import Incarnation

Inc = TypeVar("Inc", bound=Incarnation)


def sender(peer: Sequence[object] | None, incs: Sequence[Inc]) -> Inc | None:
    """The incarnation of `incs` whose processes own the client socket at `peer` (`(host, port)`, as the
    fake saw it), or None if none does or `peer` is unknown."""
    if not peer or len(peer) < 2:
        return None
    host, port = str(peer[0]), peer[1]
    for inc in incs:
        if not inc.pid or not inc.alive():
            continue
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
