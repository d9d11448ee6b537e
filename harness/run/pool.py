"""Run a scenario's trials on threads, as many at a time as a width allows (`-j`), and hand their results
back in schedule order.

1. `ordered(tasks, width, done)` starts the tasks in order; `width` is a number (`-j N`: N at a time) or a
   `Width` asked before each start how many may run now (`WhileIdle`: the cores, and more while they idle).
   At most 1: one after another on the calling thread, no pool. A task is taken from `tasks` only when it
   starts, and at most `AHEAD` x `width.most` are started and not yet handed back at any time (a window
   that moves on as results are handed back): a plan of 10,000 schedules holds a few `Future`s, not 10,000.
2. `done(i, result)` is called on the calling thread for task 0, 1, 2... in that order, each as soon as it
   and every task before it have ended: progress lines come out in the same order whatever the width.
   `ordered` keeps no result itself (a long plan's results are `done`'s to hold or let go).
3. The first task that raises stops the pool: tasks not yet started never start, those running are waited
   for (their runs end, their processes are reaped by the run), and the exception is raised again. A Ctrl-C
   while waiting does the same.

What makes the trials safe to run at the same time is not here: each trial is one run id of its own (its
processes, its checkpoint row, its fake-service journal and its kill-point barriers are keyed by it), and
the run ids are taken in schedule order before any task starts (`Session.next_run_id`). So how many run at
once, and which ends first, changes nothing but the time taken.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Protocol, TypeVar

from killpoint.run.config import MAX_JOBS

T = TypeVar("T")

AHEAD = 4
"""How many tasks per thread may be started ahead of the one handed back next: enough that a thread never
waits for work while an earlier, slower task holds up the hand-back, few enough to stay small."""


IDLE_WIDTH = 4
"""At most this many tasks per core run at once while the cores idle (`WhileIdle`), and never more than
`-j`'s own limit (`run.config.MAX_JOBS`)."""


def widest(cores: int) -> int:
    """The most a `WhileIdle` over `cores` cores lets run at once."""
    return min(MAX_JOBS, IDLE_WIDTH * cores)


class Width(Protocol):
    """How many tasks may run at once: asked before each start, never more than `most`."""

    most: int
    """The most that ever run at once (the pool's threads)."""
    recheck: float | None
    """Seconds after which to ask again while tasks run and none has ended (None: only when one ends)."""

    def now(self, running: int) -> int:
        """How many may run now, `running` running: a task starts while fewer run than this."""
        ...


class Fixed:
    """`n` at a time (`-j N`)."""

    recheck = None

    def __init__(self, n: int) -> None:
        self.most = n

    def now(self, running: int) -> int:
        return self.most


class WhileIdle:
    """`least` at a time (the cores this process may use), and one more each time the cores were idle, up to
    `most`: for trials that spend their time waiting (a framework's own polling, a sampled answer's retry, a
    grace waited out) rather than on a core, which `least` at a time leave the machine idle through.

    Each look (every `recheck` seconds at most, the first one `recheck` after construction) reads how many
    of `least` cores were busy since the last one, `busy()` (`run.cores.BusyCores`: the machine's, another
    process's work counting; under a CPU quota, the cgroup's own). With at least `SPARE` of a core idle, one more task than run now may
    start; else only as many as run now (down to `least`): a task that ends is not replaced until the cores
    idle again. It never stops a running task. Each time what it allows changes, `changed(allowed)` is told
    (the session writes it to the history: a `jobs` event).
    """

    SPARE = 0.5
    recheck: float | None = 0.25

    def __init__(self, least: int, most: int, busy: Callable[[], float] | None = None,
                 changed: Callable[[int], None] | None = None) -> None:
        self.least, self.most = least, max(least, most)
        self._changed = changed
        if busy is None:
            from killpoint.run.cores import BusyCores

            busy = BusyCores()
        self._busy = busy
        self._last = (time.monotonic(), least)  # (when the cores were last looked at, what that allowed)

    def now(self, running: int) -> int:
        at, before = self._last
        if time.monotonic() - at < (self.recheck or 0):
            return before
        idle = self.least - self._busy()
        allowed = max(self.least, min(self.most, running + 1) if idle >= self.SPARE else running)
        self._last = (time.monotonic(), allowed)
        if allowed != before and self._changed is not None:
            self._changed(allowed)
        return allowed


def ordered(tasks: Sequence[Callable[[], T]], width: int | Width, done: Callable[[int, T], None]) -> None:
    """Run `tasks` on threads, as many at once as `width` allows, handing each result to `done` in their
    order (see the module doc). Nothing is kept here: a result is `done`'s to keep or drop."""
    width = Fixed(width) if isinstance(width, int) else width
    if width.most <= 1 or len(tasks) <= 1:
        for i, task in enumerate(tasks):
            done(i, task())
        return
    window = AHEAD * width.most
    pool = ThreadPoolExecutor(max_workers=min(width.most, len(tasks)), thread_name_prefix="killpoint-trial")
    waiting: deque[Future[T]] = deque()  # started, not handed back, in task order
    running: set[Future[T]] = set()
    queued = iter(tasks)
    left = True
    try:
        i = 0
        while True:
            running = {f for f in running if not f.done()}
            while left and len(waiting) < window and len(running) < width.now(len(running)):
                task = next(queued, None)
                if task is None:
                    left = False
                    break
                future = pool.submit(task)
                waiting.append(future)
                running.add(future)
            if not waiting:
                return
            if waiting[0].done():
                done(i, waiting.popleft().result())
                i += 1
                continue
            wait(running, timeout=width.recheck if left else None, return_when=FIRST_COMPLETED)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
