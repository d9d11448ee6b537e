"""Judging again, offline, from a stored history: what `killpoint judge RUN_DIR` does.

1. Every `verdict` event names its run, the checkers that judged it and the baseline run it was judged
   against, and holds what each checker concluded.
2. For each, the run's evidence and the baseline's are rebuilt from the events before the verdict
   (`evidence.from_history`), and the same checkers run again.
3. A re-judged trial `reproduces` when every checker reaches the recorded outcome, reason and evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from killpoint.checkers import run_checkers
from killpoint.checkers.verdict import Verdict, combine
from killpoint.events import Event, Judged
from killpoint.run.evidence import from_history


@dataclass(frozen=True)
class Rejudged:
    """One trial judged again: the verdicts reached now and the ones recorded then."""

    run_id: str
    schedule: str
    recorded: tuple[dict, ...]
    verdicts: tuple[Verdict, ...]

    @property
    def outcome(self) -> str:
        return combine(list(self.verdicts))

    @property
    def reproduces(self) -> bool:
        return [v.to_dict() for v in self.verdicts] == list(self.recorded)

    def differences(self) -> list[str]:
        """One line per checker whose verdict now differs from the recorded one."""
        now = {v.checker: v.to_dict() for v in self.verdicts}
        then = {v["checker"]: v for v in self.recorded}
        out = []
        for name in sorted(set(now) | set(then)):
            a, b = then.get(name), now.get(name)
            if a != b:
                out.append(f"{name}: recorded {a['outcome'] if a else 'nothing'}"
                           f"{' (' + a['reason'] + ')' if a else ''}, now {b['outcome'] if b else 'nothing'}"
                           f"{' (' + b['reason'] + ')' if b else ''}")
        return out


def rejudge(events: list[Event]) -> list[Rejudged]:
    """Every judged trial of `events`, judged again from the events alone (see the module docstring)."""
    out = []
    for pos, e in enumerate(events):
        if not isinstance(e, Judged) or e.checkers is None:
            continue
        before = events[:pos]
        run_id = str(e.run_id)
        try:
            ev = from_history(before, run_id)
            base = from_history(before, e.baseline) if e.baseline else None
            verdicts = tuple(run_checkers(e.checkers, ev, base))
        except LookupError as exc:
            verdicts = (Verdict("evidence", "unknown", str(exc)),)
        out.append(Rejudged(run_id, e.schedule or "", tuple(e.verdicts or ()), verdicts))
    return out
