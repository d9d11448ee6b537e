"""`run_each`: a fixed plan of trials, in plan order, one at a time or (for trials that wait) together."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from killpoint.scenarios.common import WAITING_PER_JOB, run_each


class _Session:
    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.n = 0
        self._lock = threading.Lock()

    def next_run_id(self, prefix: str) -> str:
        with self._lock:
            self.n += 1
            return f"{prefix}-{self.n}"


def _ctx(jobs: int) -> tuple[Any, list[str]]:
    lines: list[str] = []
    return SimpleNamespace(session=_Session(jobs), say=lines.append), lines


def test_concurrent_trials_run_together_and_report_in_plan_order() -> None:
    """The first trial waits for the last to start: that ends only if they run at the same time. Run ids
    are taken in plan order before any trial starts, and the lines come out in plan order."""
    ctx, lines = _ctx(jobs=2)
    assert WAITING_PER_JOB * 2 >= 4  # room for all four at once
    last_started = threading.Event()

    def one(item: int, run_id: str | None) -> Any:
        if item == 3:
            last_started.set()
        if item == 0:
            assert last_started.wait(timeout=30), "the trials did not run at the same time"
        return SimpleNamespace(outcome="pass", run_id=run_id)

    trials = run_each(ctx, "s", [0, 1, 2, 3], one, lambda item, t: f"{item} {t.run_id}", concurrent=True)
    assert [t.run_id for t in trials] == ["s-1", "s-2", "s-3", "s-4"]
    assert lines == [f"s: [{i + 1}/4] {i} s-{i + 1} -> pass" for i in range(4)]


@pytest.mark.parametrize("concurrent", [False, True])
def test_one_job_or_not_concurrent_is_one_at_a_time_with_ids_taken_by_the_trial(concurrent: bool) -> None:
    """Under -j 1 (or without `concurrent`) the trials run in order on the caller's thread, and each takes
    its own run id (None is passed)."""
    ctx, lines = _ctx(jobs=1 if concurrent else 4)
    seen: list[tuple[int, str | None, str]] = []
    run_each(ctx, "s", [0, 1, 2], lambda item, run_id: seen.append((item, run_id, threading.current_thread().name))
             or SimpleNamespace(outcome="pass"), concurrent=concurrent)
    assert seen == [(i, None, threading.current_thread().name) for i in range(3)]
    assert len(lines) == 3
