"""Open a harness session from its `SessionConfig`: the one place History, Environment and Session are
wired, for the command line, the pytest plugin and the points cache.

1. Start the environment (`env.environment.Environment`): the fake services, then the fork servers, and
   while they import the agent, load it (`stepmodule.load`; a user's module is checked by the first
   server's own import, `ForkLauncher.probe`, with the limits and refusals of `stepmodule.probe`'s child,
   which sessions without fork servers still use), the previous code when given as a module
   (`--previous-steps pkg.module`: refused if it cannot be loaded, never skipped), what the session knows
   of the previous code when the config asks (`env.previous.PreviousCode`: a bad `git:REF` is refused
   here; the default is looked up on first use) and the caller's `check`. A refusal stops what was started
   for it; nothing is left. A user's module that imports a model SDK is so imported twice, at once, where
   it was imported three times, the first alone (docs/performance.md).
2. Then the rest of the environment (Postgres, the schema, the kill-point socket); a server killpoint starts
   gets room for the most runs the session may hold at once (`capacity.server_connections`).
3. Open the run directory's history (`history.jsonl`), once nothing can be refused any more.
4. Yield the `Session`, given everything at construction: options, jobs (1 under an adapter that cannot
   drive runs at the same time, and no more than the server's connection limit allows, each said
   through `say`), how many more may run while the cores idle when `-j` was not given (`run.pool.widest`,
   within the same limit), the run-id suffix, the skipped checkers, the previous code.
5. Interrupted (Ctrl-C, SIGTERM, an exit) once the history is open, the history says so
   (`session.interrupted`, by `interrupted_by`) before everything is torn down. On every path the
   environment stops, the history closes and the checkouts of earlier code are removed.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from killpoint.run.config import SessionConfig

if TYPE_CHECKING:
    from killpoint.env.previous import PreviousCode
    from killpoint.env.stepmodule import AgentSpec, Prober
    from killpoint.run.trial import Session

Say = Callable[[str], None]


def interrupted_by(exc: KeyboardInterrupt | SystemExit) -> str:
    """What stopped a session: `SIGINT`, `SIGTERM` or `exit N`."""
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    return "SIGTERM" if exc.code == 128 + signal.SIGTERM else f"exit {exc.code}"


@contextlib.contextmanager
def open_session(config: SessionConfig, say: Say | None = None,
                 check: Callable[[AgentSpec], None] | None = None) -> Iterator[Session]:
    """A session opened as `config` says, for the `with` block (the flow above). `check`: what the caller
    refuses of the loaded agent, called at once after the load, before Postgres starts (`replay`: its
    schedule's step names)."""
    from killpoint.adapters import get
    from killpoint.env.environment import Environment
    from killpoint.env.postgres.capacity import server_connections
    from killpoint.env.previous import Checkouts, PreviousCode, is_git
    from killpoint.env.stepmodule import ensure_schema, load, model_script
    from killpoint.run.history import History
    from killpoint.run.pool import widest
    from killpoint.run.trial import Session

    checkouts = Checkouts()  # earlier versions of the step module taken from git: removed at the end
    loaded: list[tuple[AgentSpec, PreviousCode | None]] = []

    def load_agent(via: Prober | None) -> object:
        """Flow step 1, while the fork servers import the agent (`via`: the first one's import is the step
        module's check); returns the step module's model script."""
        agent = load(config.steps, via=via)
        if check is not None:
            check(agent)
        if config.previous_steps and not is_git(config.previous_steps):
            load(config.previous_steps)
        loaded.append((agent, PreviousCode(agent, config.previous_steps, checkouts) if config.previous_code
                       else None))
        return model_script(agent)

    history: History | None = None
    try:
        adapter = get(config.adapter) if config.adapter is not None else None
        serial = adapter is not None and not adapter.concurrent_runs
        at_most = 1 if serial else widest(config.jobs) if config.widen else config.jobs
        with Environment(postgres=config.postgres, dsn=config.dsn, allow_any_dsn=config.allow_any_dsn,
                         spawn=config.spawn, worker_cmd=config.worker_cmd, preload=[config.steps],
                         run_dir=config.run_dir, say=say, schema=ensure_schema, effects=config.effects,
                         adapter=adapter, meanwhile=load_agent,
                         allow_egress=config.allow_egress, worker_preload=config.worker_preload,
                         connections=server_connections(at_most)) as env:
            agent, previous = loaded[0]
            history = History(config.run_dir / "history.jsonl")
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
        if history is not None:
            history.append("session.interrupted", run_id=None, by=interrupted_by(exc))
        raise
    finally:
        if history is not None:
            history.close()
        checkouts.close()
