"""Open a harness session from its `SessionConfig`: the one place History, Environment and Session are
wired, for the command line, the pytest plugin and the points cache.

1. Load the agent (a bad step module is refused here, before anything is made), and the given previous
   code when it is a module (`--previous-steps pkg.module`: one that cannot be loaded is refused, never
   skipped); a `git:REF` is taken below.
2. Make the run directory and open its history (`history.jsonl`).
3. When the config asks for it, what the session knows of the previous code (`env.previous.PreviousCode`:
   a bad `git:REF` is refused here; the default is looked up on first use).
4. Start the environment (Postgres, the fake services, the fork server or the black-box worker's adapter); a
   server killpoint starts gets room for the most runs the session may hold at once
   (`capacity.server_connections`).
5. Yield the `Session`, given everything at construction: options, jobs (1 under an adapter that cannot
   drive runs at the same time, and no more than the server's connection limit allows, each said
   through `say`), how many more may run while the cores idle when `-j` was not given (`run.pool.widest`,
   within the same limit), the run-id suffix, the skipped checkers, the previous code.
6. Interrupted (Ctrl-C, SIGTERM, an exit), the history says so (`session.interrupted`, by `interrupted_by`)
   before everything is torn down. On every path the environment stops, the history closes and the
   checkouts of earlier code are removed.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from killpoint.run.config import SessionConfig

if TYPE_CHECKING:
    from killpoint.run.trial import Session

Say = Callable[[str], None]


def interrupted_by(exc: KeyboardInterrupt | SystemExit) -> str:
    """What stopped a session: `SIGINT`, `SIGTERM` or `exit N`."""
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    return "SIGTERM" if exc.code == 128 + signal.SIGTERM else f"exit {exc.code}"


@contextlib.contextmanager
def open_session(config: SessionConfig, say: Say | None = None) -> Iterator[Session]:
    """A session opened as `config` says, for the `with` block (the flow above)."""
    from killpoint.adapters import get
    from killpoint.env.environment import Environment
    from killpoint.env.postgres.capacity import server_connections
    from killpoint.env.previous import Checkouts, PreviousCode, is_git
    from killpoint.env.stepmodule import ensure_schema, load, model_script
    from killpoint.run.history import History
    from killpoint.run.pool import widest
    from killpoint.run.trial import Session

    agent = load(config.steps)
    if config.previous_steps and not is_git(config.previous_steps):
        load(config.previous_steps)
    config.run_dir.mkdir(parents=True, exist_ok=True)
    history = History(config.run_dir / "history.jsonl")
    checkouts = Checkouts()  # earlier versions of the step module taken from git: removed at the end
    try:
        previous = PreviousCode(agent, config.previous_steps, checkouts) if config.previous_code else None
        adapter = get(config.adapter) if config.adapter is not None else None
        serial = adapter is not None and not adapter.concurrent_runs
        at_most = 1 if serial else widest(config.jobs) if config.widen else config.jobs
        with Environment(postgres=config.postgres, dsn=config.dsn, allow_any_dsn=config.allow_any_dsn,
                         spawn=config.spawn, worker_cmd=config.worker_cmd, preload=[agent.module],
                         run_dir=config.run_dir, say=say, schema=ensure_schema, effects=config.effects,
                         adapter=adapter, model_script=model_script(agent),
                         allow_egress=config.allow_egress, worker_preload=config.worker_preload,
                         connections=server_connections(at_most)) as env:
            jobs = config.jobs
            if serial and jobs > 1:
                if say is not None:
                    say(f"--adapter {adapter.name}: one run at a time ({adapter.serial_reason})")
                jobs = 1
            fit = max(1, env.pg.jobs_that_fit(jobs))  # a --dsn database's connection limit (one run fits: checked at open)
            if fit < jobs:
                if say is not None:
                    say(f"{'--dsn' if env.pg.kind == 'dsn' else f'postgres {env.pg.kind}'}: {fit} run(s) at a time "
                        "(the database's connection limit allows no more)")
                jobs = fit
            most = max(jobs, env.pg.jobs_that_fit(widest(jobs))) if config.widen and not serial else jobs
            yield Session(env, history, agent, config.options, jobs=jobs, jobs_most=most,
                          run_id_suffix=config.run_id_suffix, skip_checkers=config.skip_checkers,
                          previous_code=previous)
    except (KeyboardInterrupt, SystemExit) as exc:
        history.append("session.interrupted", run_id=None, by=interrupted_by(exc))
        raise
    finally:
        history.close()
        checkouts.close()
