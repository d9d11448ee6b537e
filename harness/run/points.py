"""The kill points an agent reaches in its crash-free run, measured once and cached by the agent's digest.

What test suites generate schedules from (a parametrize over single faults, a Hypothesis strategy),
without the user copying points by hand from earlier output:

1. Load the step module; its `digest` (SHA-256 of its source) keys the cache, so an edited agent is
   measured again and an unchanged one never is. A black-box worker (`worker_cmd`) is keyed by its command,
   its adapter and the source of its Python script (`worker_key`); one whose source cannot be found is
   measured every time.
2. Look in the cache folder (`$KILLPOINT_CACHE_DIR/points`, else `.killpoint/cache/points`) for
   `<module>-<digest>.v2.json` (`worker-<digest>.v2.json`); a readable file is the answer (its points, and
   the points reached more than once: `crash_free_run`).
3. Otherwise start an environment (the Postgres of `postgres`/`dsn`, the fake services, a fork server;
   a worker's preload, the hosts it may reach and its exit codes as the session's), run the crash-free
   baseline (`Session.baseline`, which fails with `CrashFreeFailure` when the agent does not finish), read
   its points (`trial.step_points`, `trial.point_occurrences`), tear everything down, and write the cache file
   atomically (a temporary file renamed), so concurrent pytest-xdist workers never read half a file.

The points are a pure function of the agent's code, so every worker of a distributed test run computes
the same ones and collects the same test ids.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from killpoint.faults.schedule import Occurrences, Schedule, StepPoints, exhaustive

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def cache_dir() -> Path:
    """Where measured points are kept: `$KILLPOINT_CACHE_DIR/points`, else `.killpoint/cache/points`."""
    root = os.environ.get("KILLPOINT_CACHE_DIR")
    return Path(root) / "points" if root else Path(".killpoint") / "cache" / "points"


def crash_free_points(steps: str, *, postgres: str = "auto", dsn: str | None = None,
                      cache: Path | None = None, worker_cmd: str | None = None,
                      adapter: str | None = None, allow_egress: tuple[str, ...] = (),
                      worker_preload: tuple[str, ...] | None = None,
                      exit_codes: str | None = None) -> dict[str, list[str]]:
    """For each step of the agent `steps` (or of the black-box worker `worker_cmd`, its records read by
    `adapter`), the kill points its crash-free run reaches, in order (see above; the options as
    `crash_free_run` takes them, which also gives the points reached more than once)."""
    return crash_free_run(steps, postgres=postgres, dsn=dsn, cache=cache, worker_cmd=worker_cmd, adapter=adapter,
                          allow_egress=allow_egress, worker_preload=worker_preload, exit_codes=exit_codes)[0]


def crash_free_run(steps: str, *, postgres: str = "auto", dsn: str | None = None, cache: Path | None = None,
                   worker_cmd: str | None = None, adapter: str | None = None, allow_egress: tuple[str, ...] = (),
                   worker_preload: tuple[str, ...] | None = None,
                   exit_codes: str | None = None) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """The points of the agent's crash-free run and those it reached more than once, with how often
    (`trial.point_occurrences`: a loop's later passes, which `single_faults` faults too), measured once and
    cached together (flow steps 1-3): read from
    `<name>.v2.json`, else measured and written there (an older cache file, which holds no occurrences, is
    measured again). `allow_egress`, `worker_preload` and `exit_codes` are the session's (`SessionConfig`;
    None: `default_exit_codes`): the measuring run needs the hosts the worker reaches, but they do not change
    its points, so they are no part of the cache key."""
    folder = cache if cache is not None else cache_dir()
    if worker_cmd:
        name = worker_key(worker_cmd, adapter)
        module = steps
    else:
        from killpoint.env.stepmodule import load

        agent = load(steps)
        name, module = f"{agent.module}-{agent.digest}", agent.module
    path = folder / f"{name}.v2.json" if name else None
    try:
        if path is not None:
            stored = json.loads(path.read_text())
            return ({str(k): [str(p) for p in v] for k, v in stored["points"].items()},
                    {str(k): {str(p): int(n) for p, n in v.items()} for k, v in stored["occurrences"].items()})
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        pass
    measured = _measure(module, postgres, dsn, worker_cmd, adapter, allow_egress=allow_egress,
                        worker_preload=worker_preload, exit_codes=exit_codes)
    if path is None:
        return measured
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".points-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"points": measured[0], "occurrences": measured[1]}, f, indent=1)
    os.replace(tmp, path)
    return measured


def single_faults(points: StepPoints, actions: tuple[str, ...] = ("kill", "term"),
                  occurrences: Occurrences | None = None) -> list[Schedule]:
    """Every single-fault schedule of these points, at each occurrence (`faults.schedule.exhaustive`)."""
    return exhaustive(points, actions, occurrences)


def schedules_for(steps: str, *, postgres: str = "auto", dsn: str | None = None, worker_cmd: str | None = None,
                  adapter: str | None = None, allow_egress: tuple[str, ...] = (),
                  worker_preload: tuple[str, ...] | None = None, exit_codes: str | None = None,
                  **kwargs: Any) -> SearchStrategy[Schedule]:  # noqa: ANN401
    """Hypothesis schedules (`faults.strategies.schedules`, `kwargs` its options) over the points the agent
    `steps` (or the black-box worker `worker_cmd`) reaches in its crash-free run, measured the first time a
    schedule is drawn (not at import or collection) and cached by the agent's digest, with the points it
    reached more than once (a loop's later passes, drawn too); `allow_egress`,
    `worker_preload` and `exit_codes` as `crash_free_run` takes them."""
    from killpoint.faults.strategies import deferred_schedules

    measured = functools.cache(lambda: crash_free_run(
        steps, postgres=postgres, dsn=dsn, worker_cmd=worker_cmd, adapter=adapter, allow_egress=allow_egress,
        worker_preload=worker_preload, exit_codes=exit_codes))  # one crash-free run for both
    return deferred_schedules(lambda: measured()[0], occurrences=lambda: measured()[1], **kwargs)


def worker_key(worker_cmd: str, adapter: str | None) -> str | None:
    """The cache name of a black-box worker's points: a digest of its command, its adapter and the source of
    the Python script or module it runs (an edited worker is measured again); None when that source cannot
    be found (a worker in another language, a shell around it): measured every time, never cached stale."""
    import hashlib
    import shlex

    from killpoint.env import pycommand

    cmd = pycommand.parse(shlex.split(worker_cmd))
    source = cmd.source() if isinstance(cmd, pycommand.PythonCommand) else None
    try:
        code = Path(source).read_bytes() if source else None
    except OSError:
        code = None
    if code is None:
        return None
    digest = hashlib.sha256(f"{worker_cmd}\0{adapter or ''}\0".encode() + code).hexdigest()[:16]
    return f"worker-{digest}"


def _measure(steps: str, postgres: str, dsn: str | None, worker_cmd: str | None = None,
             adapter: str | None = None, *, allow_egress: tuple[str, ...] = (),
             worker_preload: tuple[str, ...] | None = None,
             exit_codes: str | None = None) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """Run the crash-free baseline in a throwaway session (the worker's preload, egress hosts and exit codes
    as given; None exit codes: `default_exit_codes`) and return its step points and their occurrences."""
    from killpoint.run.config import SessionConfig
    from killpoint.run.opening import open_session
    from killpoint.run.options import RunOptions, default_exit_codes
    from killpoint.run.trial import point_occurrences, step_points

    options = RunOptions(exit_codes=exit_codes or default_exit_codes(worker_cmd))
    with tempfile.TemporaryDirectory(prefix="killpoint-points-") as tmp, \
            open_session(SessionConfig(steps, Path(tmp), postgres="dsn" if dsn else postgres, dsn=dsn,
                                       worker_cmd=worker_cmd, adapter=adapter, allow_egress=tuple(allow_egress),
                                       worker_preload=worker_preload, options=options)) as session:
        base = session.baseline()
        return step_points(base), point_occurrences(base)
