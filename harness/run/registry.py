"""The incarnations a driver started, and which of them a run's events come from.

1. `register(inc)`: an incarnation is known from its start on (the launcher reports its pid, or its spawn
   returns: whichever comes first; the second is a no-op). One started for a run (`worker RUN_ID`) is
   that run's from the start, and its owner.
2. `find(inc_id)`: a forked worker may report before it is registered; its reports wait (up to a timeout)
   so that they follow its `inc.start`.
3. `touch(run_id, inc)`: a worker that reported a point or a note of a run has worked on it (a queue worker
   serves many runs); `serve(run_id, inc)` also makes it the run's owner (it reported a point last).
4. `owner(run_id)`: the incarnation a held point or request of the run most likely comes from: the run's
   owner if it runs (alive, not frozen), else the last of the run's that runs, else the last alive (a
   worker just thawed whose SIGCONT the launcher has not seen yet still looks stopped).
5. `sender(run_id, info)`: the incarnation that sent a service request, found by its client socket
   (env/peers.py), when more than one of the run's workers is alive (a thawed zombie and its successor);
   the run's incarnation that ended last when the client had hung up when the fake read it (`hung_up`: a
   request a killed worker's other thread wrote, read by the fake once the successor runs, which would
   otherwise seem to send it twice); else None (then `owner` is right).

Thread-safe: the launcher's reader thread registers, barrier and service threads look up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from killpoint.env import peers
from killpoint.env.launcher import Incarnation


class Registry:
    """Every incarnation a driver started, and those that worked on each of its runs."""

    def __init__(self, run_ids: list[str]) -> None:
        self._lock = threading.Lock()
        self._registered = threading.Condition(self._lock)
        self._all: list[Incarnation] = []
        self._of: dict[str, list[Incarnation]] = {r: [] for r in run_ids}
        self._owner: dict[str, Incarnation] = {}

    def register(self, inc: Incarnation, record: Callable[[Incarnation], None]) -> None:
        """Know `inc` from now on (a no-op if it already is); `record` runs once, before `find` returns it."""
        with self._registered:
            if any(i is inc for i in self._all):
                return
            record(inc)
            self._all.append(inc)
            if inc.run_id in self._of:
                self._of[inc.run_id].append(inc)
                self._owner[inc.run_id] = inc
            self._registered.notify_all()

    def find(self, inc_id: str | None, timeout: float = 10.0) -> Incarnation | None:
        """The incarnation `inc_id`, waiting up to `timeout` for it to be registered; None if it is not."""
        if inc_id is None:
            return None
        with self._registered:
            self._registered.wait_for(lambda: any(i.inc == inc_id for i in self._all), timeout)
            return self._named(inc_id)

    def named(self, inc_id: str | None) -> Incarnation | None:
        """The incarnation `inc_id` if it is registered (no wait)."""
        with self._lock:
            return self._named(inc_id)

    def _named(self, inc_id: str | None) -> Incarnation | None:
        return next((i for i in self._all if i.inc == inc_id), None)

    def touch(self, run_id: str, inc: Incarnation | None) -> None:
        """`inc` has worked on `run_id` (a run of the driver's)."""
        with self._lock:
            if inc is not None and run_id in self._of and inc not in self._of[run_id]:
                self._of[run_id].append(inc)

    def serve(self, run_id: str, inc: Incarnation | None) -> None:
        """`inc` reported a point of `run_id`: it has worked on the run, and owns it now."""
        if inc is None:
            return
        self.touch(run_id, inc)
        with self._lock:
            self._owner[run_id] = inc

    def owner(self, run_id: str) -> Incarnation | None:
        """See the module docstring (4)."""
        with self._lock:
            cur = self._owner.get(run_id)
            if cur is not None and cur.alive() and not cur.stopped.is_set():
                return cur
            mine = self._of.get(run_id, [])
            for inc in reversed(mine):
                if inc.alive() and not inc.stopped.is_set():
                    return inc
            return next((inc for inc in reversed(mine) if inc.alive()), None)

    def sender(self, run_id: str, info: dict) -> Incarnation | None:
        """See the module docstring (5)."""
        with self._lock:
            mine = list(self._of.get(run_id, []))
        live = [i for i in mine if i.alive()]  # a just-thawed one may still look stopped
        if info.get("hung_up") and len(live) < len(mine):  # its sender is gone: no live process holds the socket
            return max((i for i in mine if not i.alive()), key=lambda i: i.ended_at or 0.0)
        return peers.sender(info.get("peer"), live) if len(live) > 1 else None

    def of_run(self, run_id: str) -> list[Incarnation]:
        """The incarnations that worked on `run_id`, in the order they did."""
        with self._lock:
            return list(self._of.get(run_id, []))

    def all(self) -> list[Incarnation]:
        with self._lock:
            return list(self._all)

    def live(self) -> list[Incarnation]:
        with self._lock:
            return [i for i in self._all if i.alive()]
