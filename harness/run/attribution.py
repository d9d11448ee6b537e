"""Which step a held service request belongs to: one rule for a single run and for a fleet.

A request carries no step of its own, so the step is taken from what the harness saw, in this order:

1. a `step` the request names itself (a header the fake read, e.g. `Killpoint-Step`);
2. the last `step.start` of the run by the incarnation the request comes from (when the caller knows
   it): a white-box worker reports where it is, and a zombie thawed inside a step is still in that step,
   whatever steps its successor reported since;
3. its idempotency key, as a hint only, when the key is `<run_id>:<step>...` and `<step>` is a step the run
   has reported (a worker may key on anything else that merely starts with the run id: a seq, a hash), or,
   for a run that reports no steps (a black-box worker), any `<step>` its key names: a deduplicated re-send
   of a step is that step's, not the one the records say comes next;
4. the step of the run's last `step.start`;
5. the cursor of the run's last committed checkpoint (a black-box worker: the step in progress);
6. the step its key names, even one never reported.

A key that names no step (an opaque stable key: a uuid, a digest) is never needed: 1, 2 and 4 come first.
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
        self._by_inc: dict[tuple[str, str], str] = {}  # (run, incarnation): a queue worker serves many runs

    def on_point(self, run_id: str, step: str | None, point: str, inc: str | None = None) -> None:
        """Record a worker's point: a `step.start` says which step the run (and incarnation `inc`) is in."""
        if point == "step.start" and step:
            with self._lock:
                self._current[run_id] = step
                self._reported.setdefault(run_id, set()).add(step)
                if inc:
                    self._by_inc[run_id, inc] = step

    def reported(self, run_id: str) -> bool:
        """True once the run's worker has reported a step (a white-box worker)."""
        with self._lock:
            return bool(self._reported.get(run_id))

    def step_of(self, run_id: str, info: dict, cursor: Callable[[], str | None],
                inc: str | None = None) -> str | None:
        """The step of a request of `run_id` described by `info` (the fake's `key`, maybe `step`), sent by
        incarnation `inc` if the caller knows it."""
        if info.get("step"):
            return str(info["step"])
        key = str(info.get("key") or "")
        prefix = f"{run_id}:"
        named = key[len(prefix):].split(":")[0] if key.startswith(prefix) else None
        with self._lock:
            reported = set(self._reported.get(run_id, ()))
            current = self._current.get(run_id)
            own = self._by_inc.get((run_id, inc)) if inc else None
        if own:
            return own
        if named and (named in reported or not reported):
            return named
        if current:
            return current
        return cursor() or named
