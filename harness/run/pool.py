"""Run a scenario's trials on up to N threads (`-j N`) and hand their results back in schedule order.

1. `ordered(tasks, jobs, done)` starts the tasks in order on a pool of `jobs` threads (`jobs` <= 1: one
   after another on the calling thread, no pool). At most `AHEAD` x `jobs` tasks are submitted and not yet
   handed back at any time (a window that moves on as results are handed back): a plan of 10,000 schedules
   holds a few `Future`s, not 10,000, and a task is taken from `tasks` only when it is submitted.
2. `done(i, result)` is called on the calling thread for task 0, 1, 2... in that order, each as soon as it
   and every task before it have ended: progress lines come out in the same order whatever `jobs` is.
   `ordered` keeps no result itself (a long plan's results are `done`'s to hold or let go).
3. The first task that raises stops the pool: tasks submitted and not started are cancelled, those not yet
   submitted never start, those running are waited for (their runs end, their processes are reaped by the
   run), and the exception is raised again. A Ctrl-C while waiting does the same.

What makes the trials safe to run at the same time is not here: each trial is one run id of its own (its
processes, its checkpoint row, its fake-service journal and its kill-point barriers are keyed by it), and
the run ids are taken in schedule order before any task starts (`Session.next_run_id`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

AHEAD = 4
"""How many tasks per thread may be submitted ahead of the one handed back next: enough that a thread
never waits for work while an earlier, slower task holds up the hand-back, few enough to stay small."""


def ordered(tasks: Sequence[Callable[[], T]], jobs: int, done: Callable[[int, T], None]) -> None:
    """Run `tasks` on up to `jobs` threads, handing each result to `done` in their order (see the module
    doc). Nothing is kept here: a result is `done`'s to keep or drop."""
    if jobs <= 1 or len(tasks) <= 1:
        for i, task in enumerate(tasks):
            done(i, task())
        return
    pool = ThreadPoolExecutor(max_workers=min(jobs, len(tasks)), thread_name_prefix="killpoint-trial")
    waiting: deque[Future[T]] = deque()
    queued = iter(tasks)

    def submit_next() -> None:
        task = next(queued, None)
        if task is not None:
            waiting.append(pool.submit(task))

    try:
        for _ in range(AHEAD * jobs):
            submit_next()
        i = 0
        while waiting:
            result = waiting.popleft().result()
            submit_next()
            done(i, result)
            i += 1
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
