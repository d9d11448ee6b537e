"""One `killpoint run|replay|explore` as a frozen value (`Invocation`), read from its parsed arguments once.

1. `invocation(args, command, label)` reads the options the suite commands share, by name, and refuses in
   this order what argparse could not: `--out` and `--junit` not writable (and, for `run` and `explore`
   without `--no-store`, the failure store: `validate.check_paths`), a bad `--effect`, `--adapter` without
   `--worker-cmd`, an unknown `--skip-checker`, a bad `--actions`. Each is one UsageError (exit 2), before
   anything starts.
2. Its `session` is the `SessionConfig` the command opens (`run.opening.open_session`): the run directory
   `--out/<time>-<label>-<pid>`, the previous code looked up (`--previous-steps`, else git), `-j` the
   cores by default, the exit-code convention `none` for a black-box worker by default.
3. The rest is what the command's scenarios get (`Context`) and where its output goes.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

from killpoint.cli import validate
from killpoint.cli.args import default_jobs, effects_option
from killpoint.env.pycommand import NONE, preload_option
from killpoint.errors import UsageError
from killpoint.faults.shard import Shard
from killpoint.run.config import SessionConfig
from killpoint.run.options import RunOptions, default_exit_codes

SEARCHES = ("run", "explore")
"""The commands that search many schedules: they remember failing ones in the failure store."""


@dataclass(frozen=True)
class Invocation:
    """What one suite command was asked (flow steps 2-3)."""

    session: SessionConfig
    seed: int = 0
    """The base seed (`run`, `explore`) or the seed replayed; 0 when none."""
    budget: float = 60.0
    """Seconds of random exploration per scenario (`--budget`)."""
    named: tuple[str, ...] = ()
    """The scenarios named with `--scenario`."""
    actions: tuple[str, ...] = ()
    """`--actions`; empty: every scenario's own."""
    shard: Shard | None = None
    store: bool = True
    """Replay and remember failing schedules, keep and resume checkpoints (off with `--no-store`)."""
    junit: str | None = None
    quiet: bool = False


def invocation(args: argparse.Namespace, command: str, label: str | None = None) -> Invocation:
    """The invocation of `command` from its arguments (the flow above); `label` names its run directory
    (default: the command)."""
    validate.check_paths(args.out, args.junit, store=command in SEARCHES and not args.no_store)
    effects = effects_option(args.effect)
    adapter_option(args.adapter, args.worker_cmd)
    worker_preload = worker_preload_option(getattr(args, "worker_preload", None), args.worker_cmd)
    skip_checkers = skip_checker_option(args.skip_checker)
    actions = actions_option(args.actions)
    run_dir = Path(args.out) / f"{time.strftime('%Y%m%d-%H%M%S')}-{label or command}-{os.getpid()}"
    exit_codes = args.exit_codes or default_exit_codes(args.worker_cmd)
    session = SessionConfig(
        steps=args.steps, run_dir=run_dir, postgres=args.postgres, dsn=args.dsn, allow_any_dsn=args.allow_any_dsn,
        spawn=args.spawn, worker_cmd=args.worker_cmd, worker_preload=worker_preload, adapter=args.adapter,
        effects=effects,
        allow_egress=tuple(getattr(args, "allow_egress", ()) or ()),
        options=RunOptions(grace=args.grace, time_budget=args.run_timeout, exit_codes=exit_codes), jobs=args.jobs or default_jobs(),
        widen=args.jobs is None,
        skip_checkers=skip_checkers, previous_steps=args.previous_steps, previous_code=True)
    named = args.scenario or ()
    return Invocation(session=session, seed=args.seed or 0, budget=args.budget,
                      named=(named,) if isinstance(named, str) else tuple(named), actions=actions, shard=args.shard,
                      store=not args.no_store, junit=args.junit, quiet=args.quiet)


def worker_preload_option(text: str | None, worker_cmd: str | None) -> tuple[str, ...] | None:
    """`--worker-preload MOD,...|none` (`pycommand.preload_option`): needs `--worker-cmd`, and names modules."""
    if text is None:
        return None
    if not worker_cmd:
        raise UsageError("preload-without-worker", "--worker-preload says what a --worker-cmd's fork servers "
                         "import, but no --worker-cmd was given", "add --worker-cmd 'python x.py {run_id}', or drop "
                         "--worker-preload")
    modules = preload_option(text)
    bad = [m for m in modules or () if not all(part.isidentifier() for part in m.split("."))]
    if modules is not None and (bad or (not modules and text.strip().lower() != NONE)):
        raise UsageError("bad-worker-preload", f"--worker-preload {text!r} is not a comma-separated list of "
                         "module names", "name modules, e.g. --worker-preload langgraph.graph,psycopg, or none")
    return modules


def adapter_option(name: str | None, worker_cmd: str | None) -> None:
    """`--adapter NAME` needs `--worker-cmd`: an adapter reads a black-box worker's records."""
    if name is not None and not worker_cmd:
        raise UsageError("adapter-without-worker", f"--adapter {name} reads a black-box worker's records, "
                         "but no --worker-cmd was given", f"add --worker-cmd 'CMD {{run_id}}' (the {name} "
                         "worker), or drop --adapter")


def skip_checker_option(values: list[str] | None) -> frozenset[str]:
    """`--skip-checker NAME` values; a name that is no checker is a usage error, not a silent no-op."""
    from killpoint.checkers import ALWAYS, CHECKERS

    names = frozenset(values or ())
    for name in sorted(names):
        if name not in CHECKERS or name in ALWAYS:
            known = ", ".join(n for n in CHECKERS if n not in ALWAYS)
            raise UsageError("unknown-checker", f"--skip-checker {name}: no checker of that name can be skipped",
                             f"use one of: {known}")
    return names


def actions_option(text: str | None) -> tuple[str, ...]:
    """`--actions kill,term` as a tuple (empty: every scenario's own actions); unknown actions are refused."""
    from killpoint.faults.points import ACTION_NAMES as ACTIONS

    if text is None:
        return ()
    chosen = tuple(a.strip() for a in text.split(",") if a.strip())
    bad = [a for a in chosen if a not in ACTIONS]
    if bad or not chosen:
        raise UsageError("bad-actions", f"--actions {text}: " + (f"unknown action {bad[0]!r}" if bad
                                                                 else "no action named"),
                         f"name actions joined by commas, from: {', '.join(ACTIONS)}")
    return chosen
