"""What a Ctrl-C or SIGTERM leaves the user: the findings so far, on disk and on screen.

1. A command keeps a ``Progress``: the scenarios it finished (their ``ScenarioResult``) and those it is
   in, each with the number of the session's judged trials when it began (``begin``).
2. When the command is interrupted, ``report(...)`` runs after the environment is torn down: the finished
   scenarios keep their outcomes, each one in progress becomes ``interrupted`` with the trials it judged so
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
    """Scenarios finished, and those in progress (flow step 1): one at a time, or several side by side
    (`run.side_by_side`)."""

    results: list[ScenarioResult] = field(default_factory=list)
    """The command's own list of results: a scenario is finished once its result is appended here."""
    begun: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Each scenario begun: (how many trials the session had judged when it began, when it began)."""
    order: list[str] = field(default_factory=list)
    """The scenarios in the suite's order, which `in_order` and `so_far` list them in (side by side, they
    finish in another)."""

    def begin(self, name: str, session: Any) -> None:
        """Scenario ``name`` starts now; the session's trials judged from here on with its run ids are its."""
        self.begun[name] = (len(_trials(session)), time.monotonic())

    def so_far(self, session: Any, by: str) -> list[ScenarioResult]:
        """The finished results and each one in progress marked ``interrupted`` (flow step 2) with its trials
        (those judged since it began, and, when several ran at once, of its own run ids, `<name>-N`), in the
        suite's order (`order`)."""
        out = list(self.results)
        finished = {r.name for r in out}
        going = [(name, first, started) for name, (first, started) in self.begun.items() if name not in finished]
        judged = _trials(session)
        for name, first, started in going:
            trials = [t for t in judged[first:] if len(going) == 1 or t.run_id.startswith(f"{name}-")]
            out.append(ScenarioResult(name, "interrupted", trials, time.monotonic() - started,
                                      reason=f"interrupted by {by} after {len(trials)} trials"))
        return self.in_order(out)

    def in_order(self, results: list[ScenarioResult]) -> list[ScenarioResult]:
        """`results` in the suite's order (`order`); a name not in it goes after those that are, in the order
        found."""
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(results, key=lambda r: rank.get(r.name, len(rank)))  # stable: the unranked keep their order


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
