"""A session that tests nothing never exits 0.

1. Before anything starts, `refuse_empty(scenarios, actions, what)` refuses a selection that cannot run a
   single trial: no scenario left (`--skip-scenario` took them all), or none whose faults are among
   `--actions`. One `UsageError` each (exit 2), naming the fix.
2. After the summary, `tested(results, code, allow_empty_shard)` keeps the command's exit code when at least
   one trial was judged (or the code says something else went wrong); when none was (every scenario
   skipped, or unknown because its agent reached none of its fault points: `run.untested`), it raises
   `NothingTested` (exit 2, one line naming every scenario's reason, the adapter's hint among them). The
   one exception is a shard that `--shard` left with nothing to do and that was asked to accept it
   (`--allow-empty-shard`, for CI matrices): a note on stderr, exit 0.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from killpoint.errors import UsageError
from killpoint.run.scenario import OTHER_SHARDS, Scenario, ScenarioResult


def untested(result: ScenarioResult) -> bool:
    """A scenario that ran no trial because its agent reached none of its fault points (`run.untested`)."""
    return result.outcome == "unknown" and not result.trials and result.reason.startswith("nothing to test")


class NothingTested(UsageError):
    """No trial was judged in the whole session (flow step 2). Exit 2."""


def refuse_empty(scenarios: Sequence[Scenario], actions: tuple[str, ...], what: str) -> None:
    """Flow step 1: `scenarios` (what `what` selected) can each run at least one fault of `actions` (all of a
    scenario's own when empty), and there is at least one of them."""
    if not scenarios:
        raise UsageError("nothing-selected", f"{what} leaves no scenario to run",
                         "skip fewer scenarios (killpoint scenarios lists them)")
    if not actions:
        return
    if all(sc.actions and not set(sc.actions) & set(actions) for sc in scenarios):
        own = sorted({a for sc in scenarios for a in sc.actions})
        raise UsageError("nothing-selected", f"--actions {','.join(actions)}: none of the faults of "
                         f"{', '.join(sc.name for sc in scenarios)} is among them, so no trial would run",
                         f"choose --actions from {', '.join(own)}, or drop --actions")


def tested(results: Sequence[ScenarioResult], code: int, allow_empty_shard: bool = False) -> int:
    """Flow step 2: `code`, unless no trial was judged (see the module doc)."""
    if any(r.trials or not (r.outcome in ("skipped", "pass") or untested(r)) for r in results):
        return code
    if code not in (0, 1):  # 1: the untested scenarios' UNKNOWN; anything else is the command's own
        return code
    if results and allow_empty_shard and all(r.reason.startswith(OTHER_SHARDS) for r in results):
        print("killpoint: note: this shard has nothing to do (every trial runs in another shard); "
              "exit 0 as --allow-empty-shard asks", file=sys.stderr)
        return 0
    reasons = "; ".join(f"{r.name}: {r.reason or r.outcome}" for r in results) or "no scenario ran"
    fix = ("pass --allow-empty-shard to accept a shard with nothing to do, or use fewer shards"
           if results and all(r.reason.startswith(OTHER_SHARDS) for r in results)
           else "select scenarios and faults that can run here (killpoint scenarios lists them)")
    raise NothingTested("nothing-tested", f"no trial ran, so nothing was tested ({reasons})", fix)
