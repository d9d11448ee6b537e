"""Which of a suite's scenarios run beside each other (`killpoint run`), and running them so.

1. `lanes(scenarios, wide)`: when `wide` (more than one trial may run at once), the scenarios that must run
   alone (`Scenario.side_by_side` false: a server they kill, a sweeper that takes any stalled run, tables
   read as a whole), in their order, one at a time; then every side-by-side scenario at once. Not wide, or
   fewer than two side by side: every scenario in its order, one at a time, as before.
2. `run_all(scenarios, wide, one, gate)` calls `one(scenario, beside)` for each, in that shape: the alone
   ones on the calling thread (`beside` false), the side-by-side ones each on a thread of its own (`beside`
   true: the scenario then measures its time budget in its share of the gate's time, `Context.share`). What
   limits the trials in flight is the session's gate (`run.gate`), which the side-by-side scenarios share:
   `-j 2` is two trials at once, not two per scenario.
3. The first exception, in `one` or in the calling thread while it waits (a Ctrl-C, a SIGTERM), closes the
   gate: no other trial starts (those waiting for a slot raise `GateClosed`), the trials running end as they
   would, every thread is waited for, and that exception is raised again. A thread that stopped only because
   the gate closed adds nothing to it.

Which scenario runs first changes nothing but the time taken: each trial is runs of its own ids, taken from
a counter of its scenario's own (`Session.next_run_id`), so a scenario's ids, lines and verdicts are the same
alone or beside others; only the order in which different scenarios' lines interleave differs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from killpoint.run.gate import Gate, GateClosed


class Placed(Protocol):
    """What `lanes` reads of a scenario."""

    side_by_side: bool


S = TypeVar("S", bound=Placed)


def lanes(scenarios: Sequence[S], wide: bool) -> tuple[list[S], list[S]]:
    """Flow step 1: (the scenarios to run one at a time, in order; those to run at once after them)."""
    beside = [sc for sc in scenarios if sc.side_by_side] if wide else []
    if len(beside) < 2:
        return list(scenarios), []
    return [sc for sc in scenarios if not sc.side_by_side], beside


def run_all(scenarios: Sequence[S], wide: bool, one: Callable[[S, bool], None], gate: Gate) -> None:
    """Flow steps 2-3."""
    alone, beside = lanes(scenarios, wide)
    try:
        for sc in alone:
            one(sc, False)
    except BaseException:
        gate.close()
        raise
    if not beside:
        return
    raised: list[BaseException] = []

    def body(sc: S) -> None:
        try:
            one(sc, True)
        except GateClosed:
            pass  # stopped for another's exception, which is the one raised
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread, raised there
            raised.append(exc)
            gate.close()

    threads = [threading.Thread(target=body, args=(sc,), name=f"killpoint-scenario-{i}", daemon=True)
               for i, sc in enumerate(beside)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:
        gate.close()
        for t in threads:
            if t.ident is not None:
                _join_through_signals(t)
        raise
    if raised:
        raise raised[0]


def _join_through_signals(thread: threading.Thread) -> None:
    """Wait for `thread` even if another Ctrl-C arrives meanwhile (the CLI's handler notes a second one and
    goes on, `cli.signals`; another handler's exception is waited through: the first one is being raised)."""
    while thread.is_alive():
        try:
            thread.join()
        except BaseException:  # noqa: BLE001, S112 - the first exception is the one the caller raises
            continue
