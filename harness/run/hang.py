"""Hung workers: an incarnation still running, not stopped by a fault, when its run's time budget ran out.

`report(history, run_id, incarnations, limit)` is called by the controller when the budget ran out, before
it kills anything:

1. The hung incarnations are those alive and not stopped (a frozen zombie is the schedule's doing, not a
   hang).
2. For each, its stack is taken (`harness/env/stacks.py`: py-spy, else the stack signal the worker named in
   its `worker.start` note), with the last kill point it reported (from the history), how long it ran and
   how much of that it spent waiting for a CPU (`procutil.cpu_wait`: a busy machine, not the worker, may
   have kept it from finishing), and recorded as a `hung` event (`inc`, `pid`, `last_point`, `stack`,
   `age`, `waited`).
3. It returns the run's limit, reworded: `hung: <inc> (last point step:point) still running after <limit>`;
   None when nothing hung (every live incarnation was stopped), and the caller keeps its own limit.

The checkers read the `hung` events from the evidence: `completes` fails naming the hang with the stack, and
no other checker judges the run as if it had finished (harness/checkers/__init__.py `run_checkers`).
"""

from __future__ import annotations

import time

from killpoint.env import stacks
from killpoint.env.launcher import Incarnation
from killpoint.env.procutil import cpu_wait
from killpoint.events import Hung, Note, Point
from killpoint.run.history import History


def report(history: History, run_id: str, incarnations: list[Incarnation], limit: str) -> str | None:
    """Record a `hung` event per hung incarnation of `run_id` (see the module doc); the new limit or None."""
    hung = [i for i in incarnations if i.alive() and not i.stopped.is_set()]
    if not hung:
        return None
    events = history.of_run(run_id)
    said: list[str] = []
    for inc in hung:
        signal_name = next((e.extra.get("stack_signal") for e in events if isinstance(e, Note)
                            and e.note == "worker.start" and e.inc == inc.inc), None)
        last = next((f"{e.step}:{e.point}" for e in reversed(events) if isinstance(e, Point) and e.inc == inc.inc),
                    None)
        waited = cpu_wait(inc.pid)
        age = round(time.time() - inc.since, 3) if inc.since else None
        stack = stacks.dump(inc.pid, inc.log, signal_name)
        history.add(Hung(run_id=run_id, inc=inc.inc, pid=inc.pid, last_point=last, stack=stack, age=age,
                         waited=None if waited is None else round(waited, 3)))
        said.append(f"{inc.inc} (last point {last or 'none'})")
    return f"hung: {', '.join(said)} still running, {limit}"
