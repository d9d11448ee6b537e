"""A pytest plugin for `bench/suite.py --by-file`: the CPU each test costs the whole machine's share of it,
written as one JSON line per test to ``$KILLPOINT_BENCH_CPU_OUT``.

`RUSAGE_CHILDREN` alone misplaces much of a test's CPU: the suite's zygotes, the session's Postgres and
the fork servers forked from the zygotes outlive the test, so what their children did reaches the test
process's counters only when they end (at the end of the session, under the last test). So each test's CPU
is, after minus before, the sum of

1. this process (`RUSAGE_SELF`) and every child it reaped (`RUSAGE_CHILDREN`), and
2. every live descendant (psutil): its own CPU and that of the children *it* reaped (``children_user``,
   ``children_system``: /proc's cutime and cstime).

A process alive before the test and reaped during it by a live descendant is counted once: its CPU before
is in the first sum, its whole CPU in its reaper's after. A process whose reaper also ended between the two
is counted through the reaper's reaper, up to this process. Loaded with
``-p bench.cpu_by_test`` from the repository's root (where `python -m pytest` puts it on the import path).
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator

import psutil
import pytest

OUT = "KILLPOINT_BENCH_CPU_OUT"


def tree_cpu() -> float:
    """CPU seconds (user + system) of this process, what it reaped, and its live descendants with theirs."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    for proc in psutil.Process().children(recursive=True):
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended between the listing and the read: its reaper counts it
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, wall = tree_cpu(), time.monotonic()
    yield
    row = {"id": item.nodeid, "cpu": round(tree_cpu() - cpu, 3), "wall": round(time.monotonic() - wall, 3)}
    path = os.environ.get(OUT)
    if path:
        with open(path, "a") as f:  # one short line per write: the xdist workers' lines do not interleave
            f.write(json.dumps(row) + "\n")
