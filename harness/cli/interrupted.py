"""What a Ctrl-C or SIGTERM leaves the user: the findings so far, on disk and on screen.

1. A command keeps a ``Progress``: the scenarios it finished (their ``ScenarioResult``) and the one it is
   in, with the number of the session's judged trials when that one began (``begin``/``done``).
2. When the command is interrupted, ``report(...)`` runs after the environment is torn down: the finished
   scenarios keep their outcomes, the one in progress becomes ``interrupted`` with the trials it judged so
   far, and ``verdicts.json`` and ``meta.json`` are written with an ``interrupted`` mark (meta:
   ``{"interrupted": "SIGINT"}``; the scenario's ``reason`` says after how many trials).
3. The summary lines and the replay line of every failing (or undecided) trial found so far are printed,
   so a failure found before the Ctrl-C is never lost. Anything that goes wrong here is reported in one
   line and never hides the interruption itself.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from killpoint.run.scenario import ScenarioResult


@dataclass
class Progress:
    """Scenarios finished, and the one in progress (flow step 1)."""

    results: list[ScenarioResult] = field(default_factory=list)
    """The command's own list of results: a scenario is finished once its result is appended here."""
    current: str | None = None
    first_trial: int = 0
    finished: int = 0
    started: float = 0.0

    def begin(self, name: str, session: Any) -> None:
        """Scenario ``name`` starts now; the session's trials judged from here on are its."""
        self.current, self.first_trial, self.started = name, len(_trials(session)), time.monotonic()
        self.finished = len(self.results)

    def so_far(self, session: Any, by: str) -> list[ScenarioResult]:
        """The finished results, then the one in progress marked ``interrupted`` (flow step 2)."""
        out = list(self.results)
        if self.current is not None and len(self.results) == self.finished:
            trials = _trials(session)[self.first_trial:]
            out.append(ScenarioResult(self.current, "interrupted", trials,
                                      time.monotonic() - self.started,
                                      reason=f"interrupted by {by} after {len(trials)} trials"))
        return out


def _trials(session: Any) -> list:
    return list(getattr(session, "trials", None) or [])


def report(session: Any, progress: Progress, meta: dict, by: str) -> None:
    """Write ``verdicts.json``/``meta.json`` marked ``interrupted`` and print the findings so far (flow 2-3)."""
    from killpoint.report.text import replay_line, scenario_line, write_run_dir  # noqa: PLC0415

    try:
        results = progress.so_far(session, by)
        run_dir = session.env.run_dir
        write_run_dir(run_dir, results, {**meta, "interrupted": by, "steps": session.agent.module,
                                         "steps_digest": session.agent.digest})
        print(f"\ninterrupted by {by}: the findings so far", flush=True)
        for r in results:
            print(scenario_line(r))
        bad = [(r.name, t) for r in results if r.outcome != "expected" for t in r.trials
               if t.outcome in ("fail", "unknown")]
        for name, t in bad:
            print(f"  {t.outcome.upper()}: {name} run {t.run_id}; replay: "
                  f"{replay_line(name, t, getattr(t, 'steps', None) or session.agent.module)}")
        print(f"run directory (verdicts.json marked interrupted): {run_dir}", flush=True)
    except Exception as exc:  # noqa: BLE001 - the interruption is what the user must hear about
        print(f"killpoint: could not write the findings so far ({type(exc).__name__}: {exc})", file=sys.stderr)
