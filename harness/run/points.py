"""The kill points an agent reaches in its crash-free run, measured once and cached by the agent's digest.

What test suites generate schedules from (a parametrize over single faults, a Hypothesis strategy),
without the user copying points by hand from earlier output:

1. Load the step module; its `digest` (SHA-256 of its source) keys the cache, so an edited agent is
   measured again and an unchanged one never is.
2. Look in the cache folder (`$KILLPOINT_CACHE_DIR/points`, else `.killpoint/cache/points`) for
   `<module>-<digest>.json`; a readable file is the answer.
3. Otherwise start an environment (the Postgres of `postgres`/`dsn`, the fake services, a fork server),
   run the crash-free baseline (`Session.baseline`, which fails with `CrashFreeFailure` when the agent does
   not finish), read its points (`trial.step_points`), tear everything down, and write the cache file
   atomically (a temporary file renamed), so concurrent pytest-xdist workers never read half a file.

The points are a pure function of the agent's code, so every worker of a distributed test run computes
the same ones and collects the same test ids.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from killpoint.faults.schedule import Schedule, StepPoints, exhaustive

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def cache_dir() -> Path:
    """Where measured points are kept: `$KILLPOINT_CACHE_DIR/points`, else `.killpoint/cache/points`."""
    root = os.environ.get("KILLPOINT_CACHE_DIR")
    return Path(root) / "points" if root else Path(".killpoint") / "cache" / "points"


def crash_free_points(steps: str, *, postgres: str = "auto", dsn: str | None = None,
                      cache: Path | None = None) -> dict[str, list[str]]:
    """For each step of the agent `steps`, the kill points its crash-free run reaches, in order (see above)."""
    from killpoint.env.stepmodule import load

    agent = load(steps)
    folder = cache if cache is not None else cache_dir()
    path = folder / f"{agent.module}-{agent.digest}.json"
    try:
        return {str(k): [str(p) for p in v] for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        pass
    points = _measure(agent.module, postgres, dsn)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".points-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(points, f, indent=1)
    os.replace(tmp, path)
    return points


def single_faults(points: StepPoints, actions: tuple[str, ...] = ("kill", "term")) -> list[Schedule]:
    """Every single-fault schedule of these points (`faults.schedule.exhaustive`)."""
    return exhaustive(points, actions)


def schedules_for(steps: str, *, postgres: str = "auto", dsn: str | None = None,
                  **kwargs: Any) -> SearchStrategy[Schedule]:  # noqa: ANN401
    """Hypothesis schedules (`faults.strategies.schedules`, `kwargs` its options) over the points the agent
    `steps` reaches in its crash-free run, measured the first time a schedule is drawn (not at import or
    collection) and cached by the agent's digest."""
    from killpoint.faults.strategies import deferred_schedules

    return deferred_schedules(lambda: crash_free_points(steps, postgres=postgres, dsn=dsn), **kwargs)


def _measure(steps: str, postgres: str, dsn: str | None) -> dict[str, list[str]]:
    """Run the crash-free baseline in a throwaway session and return its step points."""
    from killpoint.run.config import SessionConfig
    from killpoint.run.opening import open_session
    from killpoint.run.trial import step_points

    with tempfile.TemporaryDirectory(prefix="killpoint-points-") as tmp, \
            open_session(SessionConfig(steps, Path(tmp), postgres="dsn" if dsn else postgres, dsn=dsn)) as session:
        return step_points(session.baseline())
