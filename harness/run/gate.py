"""How many of a session's trials run at once, whichever scenario they belong to (`-j`).

1. A session holds one `Gate` over its width (`run.pool.Fixed` for `-j N`, `run.pool.WhileIdle` without
   `-j`). A trial runs inside `with gate.slot():`, which waits until fewer trials of the whole session run
   than the width allows now (`Width.now(running)`, asked again every `Width.recheck` seconds while waiting:
   a `WhileIdle` lets one more in when the cores idled).
2. Slots are given in the order they were asked for (a ticket each): a scenario whose threads asked first
   is not overtaken by another's, so each plan's trials start in plan order and its lines come out steadily.
3. `close()` (a Ctrl-C, a fatal error) makes every `slot()` waiting or asked after raise `GateClosed`: the
   trials not yet started never start, those running end as they would. A closed gate stays closed.
4. A slot is taken for an owner (a scenario's name). `share(owner)` is the owner's share of the time so far:
   each moment that trials run is divided among the owners by their trials in flight (two scenarios with
   one trial each get half a second each per second; alone, a scenario gets the whole second). A scenario
   running beside others measures its time budget in it (`Context.share`), so sharing the machine leaves it
   the exploration it would have had alone.

Two scenarios that run side by side (`Scenario.side_by_side`) share the session's width through it, so `-j 2`
still means two trials at once, not two per scenario.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from killpoint.run.pool import Fixed, Width


class GateClosed(Exception):  # noqa: N818 - what happened, not an error to report: the run is stopping
    """The gate was closed (flow step 3): this trial must not start."""


class Gate:
    """The session's trials in flight, at most what its width allows (flow above)."""

    def __init__(self, width: int | Width, clock: Callable[[], float] = time.monotonic) -> None:
        self.width: Width = Fixed(width) if isinstance(width, int) else width
        self._clock = clock
        self._cond = threading.Condition()
        self._running = 0
        self._asked = 0  # tickets handed out
        self._serving = 0  # the ticket whose turn it is
        self._closed = False
        self._owners: dict[str, int] = {}  # trials in flight per owner
        self._shares: dict[str, float] = {}  # seconds of share accrued per owner (flow step 4)
        self._since = clock()  # when the shares were last brought up to date

    @property
    def most(self) -> int:
        """The most trials that ever run at once: how many threads a plan needs."""
        return self.width.most

    def share(self, owner: str) -> float:
        """Flow step 4: `owner`'s share of the time its trials ran, in seconds."""
        with self._cond:
            self._accrue()
            return self._shares.get(owner, 0.0)

    def _accrue(self) -> None:
        """Divide the time since the last change among the owners by their trials in flight (lock held)."""
        now = self._clock()
        if self._running:
            per_trial = (now - self._since) / self._running
            for owner, n in self._owners.items():
                self._shares[owner] = self._shares.get(owner, 0.0) + per_trial * n
        self._since = now

    @contextlib.contextmanager
    def slot(self, owner: str = "") -> Iterator[None]:
        """Flow steps 1-2: wait for a turn and a free slot, hold it (for `owner`) while the block runs."""
        with self._cond:
            ticket = self._asked
            self._asked += 1
            try:
                while True:
                    if self._closed:
                        raise GateClosed
                    if ticket == self._serving and self._running < self.width.now(self._running):
                        break
                    self._cond.wait(self.width.recheck)
            finally:
                if ticket == self._serving:  # admitted or refused, the next ticket's turn comes
                    self._serving += 1
                    self._cond.notify_all()
            self._accrue()
            self._running += 1
            self._owners[owner] = self._owners.get(owner, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._accrue()
                self._running -= 1
                self._owners[owner] -= 1
                self._cond.notify_all()

    def close(self) -> None:
        """Flow step 3."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
