"""Runs of a set held together at the start of each step (concurrent-runs): a barrier, never a sleep.

`Rendezvous(run_ids, timeout, told)` holds the runs of a set that start together (queue workers serving
one run each) so that each step's work begins in every run at the same moment, whatever the agent names
its steps:

1. `arrive(run_id, step)` is called on the barrier thread of the run's worker at its `step.start` (the
   worker waits for the answer). The first arrival of each run of the set at `step` waits until every run
   of the set has arrived there; then all of them go on at once, and `told("together", step, runs)`. So a
   figure every run reads in one step and writes back in a later one is read by all before any writes it
   (a lost update is made, not left to chance), and every step's own read-then-write races in all runs.
2. An arrival at a step the runs already went on from (a resumed incarnation repeating it), of a run not
   of the set, or after the rendezvous broke, goes on at once.
3. Not every run there within `timeout` seconds of the first arrival at a step (one run waits on another,
   e.g. for a lock it holds across steps; a run failed, was killed, or took another path): the runs there
   go on, the rendezvous is broken for the rest of the set (no run is held again) and
   `told("broken", step, missing)`. A set pays that timeout once at most, never a verdict.
4. `close()` lets every held run go and breaks the rendezvous without telling (the set is being ended).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

HOLD_SECONDS = 3.0
"""How long the runs that arrived at a step wait for the others (flow step 3): far above the few
milliseconds between the runs' arrivals on a loaded machine, and all a correct agent whose runs hold each
other back loses."""

Told = Callable[[str, str, list[str]], None]


class Rendezvous:
    """The runs `run_ids` held at each step's start until all are there (see the module docstring)."""

    def __init__(self, run_ids: Sequence[str], timeout: float = HOLD_SECONDS, told: Told | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runs = frozenset(run_ids)
        self.timeout = timeout
        self._told = told
        self._clock = clock
        self._cond = threading.Condition()
        self._arrived: dict[str, set[str]] = {}
        self._deadline: dict[str, float] = {}
        self._gone: set[str] = set()  # steps the runs went on from
        self.broken = False
        self.together: list[str] = []
        """The steps every run of the set began at once, in order."""
        self.missing: tuple[str, list[str]] | None = None
        """Where the rendezvous broke (flow step 3): the step, and the runs that had not come."""

    def arrive(self, run_id: str, step: str) -> None:
        """Flow steps 1-3: return when `run_id` may begin `step`."""
        with self._cond:
            arrived = self._arrived.setdefault(step, set())
            if self.broken or step in self._gone or run_id not in self.runs or run_id in arrived:
                return
            arrived.add(run_id)
            deadline = self._deadline.setdefault(step, self._clock() + self.timeout)
            if arrived == self.runs:
                self.together.append(step)
                self._go(step, "together", sorted(arrived))
                return
            while step not in self._gone and not self.broken:
                left = deadline - self._clock()
                if left <= 0:
                    self.broken = True
                    self.missing = (step, sorted(self.runs - arrived))
                    self._go(step, "broken", self.missing[1])
                    return
                self._cond.wait(left)

    def _go(self, step: str, how: str, runs: list[str]) -> None:
        """Let every run held at `step` go on, and say so (lock held)."""
        self._gone.add(step)
        self._cond.notify_all()
        if self._told is not None:
            self._told(how, step, runs)

    def close(self) -> None:
        """Flow step 4."""
        with self._cond:
            self.broken = True
            self._cond.notify_all()
