"""Which step a held service request belongs to: one rule for a single run and for a fleet.

A request carries no step of its own, so the step is taken, in this order, from:

1. a `step` the request names itself (a header the fake read, e.g. `Killpoint-Step`);
2. its idempotency key, when the key is `<run_id>:<step>...` and `<step>` is a step the run has reported
   (a worker may key on anything else that merely starts with the run id: a seq, a hash);
3. the step of the run's last `step.start` (a white-box worker reports where it is);
4. the cursor of the run's last committed checkpoint (a black-box worker: the step in progress);
5. the step its key names, even one never reported.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class StepAttribution:
    """The steps runs report at `step.start`, and the rule above for the requests they send."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[str, str | None] = {}
        self._reported: dict[str, set[str]] = {}

    def on_point(self, run_id: str, step: str | None, point: str) -> None:
        """Record a worker's point: a `step.start` says which step the run is in."""
        if point == "step.start" and step:
            with self._lock:
                self._current[run_id] = step
                self._reported.setdefault(run_id, set()).add(step)

    def reported(self, run_id: str) -> bool:
        """True once the run's worker has reported a step (a white-box worker)."""
        with self._lock:
            return bool(self._reported.get(run_id))

    def step_of(self, run_id: str, info: dict, cursor: Callable[[], str | None]) -> str | None:
        """The step of a request of `run_id` described by `info` (the fake's `key`, maybe `step`)."""
        if info.get("step"):
            return str(info["step"])
        key = str(info.get("key") or "")
        prefix = f"{run_id}:"
        named = key[len(prefix):].split(":")[0] if key.startswith(prefix) else None
        with self._lock:
            reported = set(self._reported.get(run_id, ()))
            current = self._current.get(run_id)
        if named and named in reported:
            return named
        if current:
            return current
        return cursor() or named
