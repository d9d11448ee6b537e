"""The durable loop: load (or start) a run, then step, checkpoint, step, checkpoint, until done.

One iteration: check the drain flag; renew the lease (not before the first step: taking it just now was its
renewal); report ``step.start``; run the step at the cursor;
``seq + 1``; merge the state patch; take the window (compacted to the budget); add the cost; save, with the
step's in-transaction write, under the monotonic guard. Resume is "load, else initial": a run continues
from its last checkpoint in whatever process picks it up.

:func:`run_durable` returns the last checkpoint (status ``done``, ``paused`` after a drain, or ``failed``)
and raises :class:`~killpoint.reference_agent.lease.LeaseBusy` / :class:`~killpoint.reference_agent.lease.LeaseLost`,
:class:`~killpoint.reference_agent.versioning.NewerCheckpoint` / :class:`~killpoint.reference_agent.versioning.IncompatibleCheckpoint`,
or :class:`~killpoint.reference_agent.store.Fenced` when it must stop without touching the run further.

This module also re-exports the names a step module needs (contracts.md section 4).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from . import killpoints
from .checkpoint import DONE, FAILED, FINISHED, PAUSED, RUNNING, TERMINAL_STATUSES, Checkpoint, now_iso
from .clients import EffectFailed, ServiceUnavailable
from .compaction import compact
from .context import Point, Resources, StepContext, StepResult
from .lease import Lease
from .step_module import StepModule
from .store import CheckpointStore
from .versioning import IncompatibleCheckpoint, parse, upgrade

__all__ = ["DONE", "Checkpoint", "Drain", "RunOptions", "StepContext", "StepFailed", "StepResult",
           "run_durable"]

log = logging.getLogger("reference_agent")


class StepFailed(Exception):
    """Raised by a step for a failure that retrying cannot fix: the run is checkpointed as ``failed``."""


PAUSE_SLICE = 0.02
"""How long an idle wait (`Drain.pause`) sleeps before it looks at the drain flag again."""


class Drain:
    """The drain flag: set (from a signal handler) to make the loop yield at the next step boundary.
    `run_id`: the run the worker is on (None between a queue worker's jobs), for the notes the handler and
    the drain deadline send (the harness routes a note by its run id)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.run_id: str | None = None

    def request(self) -> None:
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def pause(self, seconds: float) -> None:
        """Sleep up to ``seconds``, ending within ``PAUSE_SLICE`` of a drain being requested: an idle queue
        worker stops when told, not at its next poll. In slices rather than ``Event.wait``: the request comes
        from a signal handler on this same thread, which a sleep would resume after (PEP 475), and which must
        not contend for the event's lock with a ``wait`` it interrupted."""
        end = time.monotonic() + seconds
        while not self.requested:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, PAUSE_SLICE))


@dataclass(frozen=True)
class RunOptions:
    """``owner``: lease owner id. ``lease_seconds``: lease length. ``step_delay``: seconds each step spends in
    flight before it runs (for drain tests); ``slow_steps``: the steps it applies to (every step when empty).
    ``window_budget``: compaction budget in JSON characters."""

    owner: str
    lease_seconds: float = 30.0
    step_delay: float = 0.0
    slow_steps: tuple[str, ...] = ()
    window_budget: int = 16_000


def _reporter(run_id: str, step: str, seq: int) -> Point:
    """Report kill points of ``step`` with ``seq`` (the loaded seq at step.start and effect.responded, the
    seq being written at checkpoint.writing and checkpoint.committed)."""
    def point(name: str) -> None:
        killpoints.report(name, run_id, step, seq)
    return point


def _start_or_resume(store: CheckpointStore, run_id: str, module: StepModule,
                     params: dict[str, Any] | None) -> Checkpoint:
    raw = store.load(run_id)
    if raw is None:
        cp = Checkpoint(run_id=run_id, seq=0, version=module.state_version, cursor=module.start,
                        status=RUNNING, state=module.initial_state(dict(params or {})), window=[],
                        cost_usd=0.0, updated_at=now_iso())
        store.save(cp)  # seq 0: the run exists, with its parameters, before its first step
        return cp
    cp = upgrade(parse(run_id, raw), module.state_version, module.migrations)
    if cp.cursor != DONE and cp.cursor not in module.steps:
        raise IncompatibleCheckpoint(run_id, f"cursor {cp.cursor!r} names no step of {module.name}")
    return cp


def run_durable(store: CheckpointStore, run_id: str, module: StepModule, resources: Resources,
                options: RunOptions, drain: Drain, params: dict[str, Any] | None = None) -> Checkpoint:
    """Run ``run_id`` to its end, or until drained; see the module docstring for what it raises."""
    lease = Lease(store.conn, run_id, options.owner, options.lease_seconds)
    lease.acquire()
    fresh = True  # the lease was set to expire a full term from now a moment ago: renewing it adds nothing
    try:
        cp = _start_or_resume(store, run_id, module, params)
        while cp.cursor != DONE and cp.status not in TERMINAL_STATUSES:
            if drain.requested:
                if cp.status != PAUSED:
                    cp = cp.replace(seq=cp.seq + 1, status=PAUSED, updated_at=now_iso())
                    store.save(cp)
                break
            if not fresh:
                lease.renew()
            fresh = False
            cp = _step(store, cp, module, resources, options, drain)
    finally:
        # Whatever ended this worker's part (done, drained, refused, fenced, an error), it will not touch the
        # run again: let the next worker in at once. Only the lease's own owner row is deleted.
        with contextlib.suppress(psycopg.Error):
            lease.release()
    if cp.status == PAUSED:
        log.warning("yielding for shutdown: run_id=%s cursor=%s seq=%s", run_id, cp.cursor, cp.seq)
        killpoints.note("drain.yield", run_id=run_id, step=cp.cursor, seq=cp.seq)
    return cp


def _step(store: CheckpointStore, cp: Checkpoint, module: StepModule, resources: Resources,
          options: RunOptions, drain: Drain) -> Checkpoint:
    step = cp.cursor
    point = _reporter(cp.run_id, step, cp.seq)
    point("step.start")
    if options.step_delay > 0 and (not options.slow_steps or step in options.slow_steps):
        time.sleep(options.step_delay)  # a SIGTERM here runs its handler, then the sleep goes on (PEP 475)
    ctx = resources.context(cp.run_id, step, cp.seq, point)
    try:
        result = module.steps[step](cp, ctx)
    except ServiceUnavailable:
        raise  # transient: the run stays as it is, to be resumed
    except (StepFailed, EffectFailed) as exc:
        log.error("run %s failed at step %s: %s", cp.run_id, step, exc)
        failed = cp.replace(seq=cp.seq + 1, status=FAILED, state={**cp.state, "error": str(exc)},
                            updated_at=now_iso())
        store.save(failed, point=_reporter(cp.run_id, step, failed.seq))
        return failed
    if result.cursor != DONE and result.cursor not in module.steps:
        raise ValueError(f"step {step!r} returned unknown cursor {result.cursor!r}")
    status = FINISHED if result.cursor == DONE else PAUSED if drain.requested else RUNNING
    window = compact(cp.window if result.window is None else result.window, options.window_budget)
    nxt = cp.replace(seq=cp.seq + 1, cursor=result.cursor, status=status,
                     state={**cp.state, **result.state}, window=window,
                     cost_usd=round(cp.cost_usd + result.cost_usd, 9), updated_at=now_iso())
    store.save(nxt, in_txn=result.in_txn, point=_reporter(cp.run_id, step, nxt.seq))
    return nxt
