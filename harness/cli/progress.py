"""Progress of a long run: done/total, failures so far, elapsed time and ETA, per scenario.

1. `TrialProgress.for_terminal(console)` picks the form: a rich progress bar when the console is a terminal
   and `CI` is unset, else plain lines (one per trial), which logs and CI consoles keep readable.
2. The scenario loops call it once per judged trial (`Context.on_trial(scenario, done, total, trial)`); a
   new scenario name starts a new task (bar or line prefix). The ETA is the mean time per trial so far times
   the trials left (unknown before the first trial).
3. A scenario runs its trials in phases (`crash-points`: every single fault, then random schedules), each a
   plan counted from 1: a phase that starts (`done == 1`) after another adds to what the scenario did, so
   its count and total run on (`crash-points` ends at 48/48, not 8/8).
4. `ended(result)`: a scenario that ran its trials its own way (no plan, so no call per trial) gets its
   bar or line when it ends, its trials done of as many.
5. `close()` stops the bar (the summary is printed after it); plain lines need no closing.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from rich.console import Console

PLAIN_EVERY = 10
"""Without a live bar, a progress line every this many trials of a scenario, and after its last."""


def is_live(console: Console, env: dict[str, str] | None = None) -> bool:
    """Flow step 1: a live bar only on a terminal, and never under CI."""
    env = dict(os.environ) if env is None else env
    return console.is_terminal and not env.get("CI")


def plain_line(scenario: str, done: int, total: int, failures: int, elapsed: float, outcome: str) -> str:
    """One plain progress line (flow step 2)."""
    eta = f"{elapsed / done * (total - done):.0f}s" if done else "?"
    return (f"{scenario}: {done}/{total} trials, {failures} failure{'s' if failures != 1 else ''} so far, "
            f"elapsed {elapsed:.0f}s, eta {eta} (last: {outcome})")


class TrialProgress:
    """Counts a run's trials per scenario and shows them (flow above)."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.live = live
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}
        self._started: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._done: dict[str, int] = {}  # per scenario, the trials counted so far (every phase)
        self._base: dict[str, int] = {}  # per scenario, the trials of its phases before the current one
        self._lock = threading.Lock()  # scenarios side by side count from their own threads

    @classmethod
    def for_terminal(cls, console: Console) -> TrialProgress:
        return cls(console, is_live(console))

    def __call__(self, scenario: str, done: int, total: int, outcome: str) -> None:
        """Flow steps 2-3: one more trial of `scenario` was judged `outcome` (`done` of `total` of its phase)."""
        with self._lock:
            self._count(scenario, done, total, outcome)

    def _count(self, scenario: str, done: int, total: int, outcome: str) -> None:
        if done == 1 and scenario in self._done:  # a new phase: count on from the earlier ones
            self._base[scenario] = self._done[scenario]
        base = self._base.get(scenario, 0)
        done, total = base + done, base + total
        self._done[scenario] = done
        self._show(scenario, done, total, outcome)

    def ended(self, result: Any) -> None:  # noqa: ANN401  (a ScenarioResult)
        """Flow step 4: `result`'s scenario ended; if it never counted a trial here, show its trials now."""
        with self._lock:
            self._ended(result)

    def _ended(self, result: Any) -> None:  # noqa: ANN401
        if result.name in self._done or not result.trials:
            return
        self._started[result.name] = time.monotonic() - result.elapsed
        n = len(result.trials)
        self._failures[result.name] = sum(t.outcome == "fail" for t in result.trials[:-1])
        self._done[result.name] = n
        self._show(result.name, n, n, result.trials[-1].outcome)

    def _show(self, scenario: str, done: int, total: int, outcome: str) -> None:
        started = self._started.setdefault(scenario, time.monotonic())
        if outcome == "fail":
            self._failures[scenario] = self._failures.get(scenario, 0) + 1
        failures = self._failures.get(scenario, 0)
        if not self.live:
            if done % PLAIN_EVERY and done != total:
                return  # the per-trial lines say the rest; a count every PLAIN_EVERY trials and at the end
            self.console.print(plain_line(scenario, done, total, failures, time.monotonic() - started, outcome),
                               markup=False, highlight=False, soft_wrap=True)
            return
        bar = self._ensure_bar()
        if scenario not in self._tasks:
            self._tasks[scenario] = bar.add_task(scenario, total=total, failures=0)
        bar.update(self._tasks[scenario], completed=done, total=total, failures=failures)

    def _ensure_bar(self) -> Any:  # noqa: ANN401
        if self._bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("[red]{task.fields[failures]} failed"), TimeElapsedColumn(),
                                 TextColumn("eta"), TimeRemainingColumn(), console=self.console, transient=False)
            self._bar.start()
        return self._bar

    def close(self) -> None:
        """Flow step 3."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
