"""The one interface the environment routes a run's events to: `RunListener`.

The environment owns the channels events arrive on (the kill-point socket, the fake services' hook, the
launcher's start and exit reports, the SQL barrier of a black-box worker); a run is driven by whoever
attached a listener for its run id: a `RunController` for one run, a `Fleet` port for each run of a
fleet. Every listener implements every method, so the environment never asks what it is talking to.

Threads: barrier and service threads call the `on_*point` methods and may be held for as long as the
method blocks (that is the barrier); the launcher's reader thread calls `on_start`/`on_exit`.
"""

from __future__ import annotations

from typing import Protocol

from killpoint.env.launcher import Incarnation
from killpoint.fake_services.hooks import Decision


class RunListener(Protocol):
    """What one run id's events go to. `incarnations` are the processes that have worked on the run."""

    run_id: str
    incarnations: list[Incarnation]

    def on_start(self, inc: Incarnation) -> None:
        """An incarnation of this run has a pid (before any of its reports is handled)."""

    def on_exit(self, inc: Incarnation) -> None:
        """An incarnation of this run ended (after its last notes were handled)."""

    def on_worker_point(self, msg: dict) -> bool:
        """A white-box worker reports a kill point and waits; True answers it, False leaves it unanswered."""
        ...

    def on_held_point(self, step: str | None, point: str, inc_id: str | None, source: str,
                      seq: int | None = None) -> bool:
        """A worker is held at a point from outside (a black-box worker's checkpoint); True releases it."""
        ...

    def on_service_point(self, point: str, info: dict) -> Decision:
        """A fake service holds a request of this run at `point`; the decision releases it."""
        ...

    def on_note(self, msg: dict) -> None:
        """A worker's note (no answer)."""
