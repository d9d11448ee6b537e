"""The parsers of the suite's commands (run, replay, explore, scenarios, report, judge).

Built at every start of the CLI, whatever the command, so this module imports nothing of the suite: each
command's function is `killpoint.cli.commands`'s, imported when it runs (`_later`). `killpoint scenarios`,
`--help` and a malformed command line so answer without importing the runner, the checkers or the console
(tests/cli/test_cli_imports.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from killpoint.cli import validate
from killpoint.cli.args import add_common
from killpoint.faults.shard import parse as parse_shard
from killpoint.run.catalog import known


def _later(name: str) -> Callable[[argparse.Namespace], int]:
    """`killpoint.cli.commands.<name>`, imported when the command runs."""

    def command(args: argparse.Namespace) -> int:
        from killpoint.cli import commands  # noqa: PLC0415 - the suite, only for the command that runs

        return getattr(commands, name)(args)

    command.__name__ = command.__qualname__ = name
    return command


def add_search_options(p: argparse.ArgumentParser) -> None:
    """The options of the commands that search many schedules (run, explore)."""
    p.add_argument("--no-store", action="store_true",
                   help="neither replay nor remember failing schedules (.killpoint/failures), nor keep or "
                        "resume checkpoints (.killpoint/checkpoints)")
    p.add_argument("--shard", type=parse_shard, default=None, metavar="K/N",
                   help="run only shard K of N of the schedules (split a run across CI jobs)")
    p.add_argument("--allow-empty-shard", action="store_true",
                   help="with --shard: exit 0 when every trial of this shard's selection runs in another shard "
                        "(else a session that tested nothing exits 2)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the crash suite (all scenarios, or --scenario NAME)")
    p.add_argument("--scenario", action="append", default=None, type=known,
                   help="a scenario to run (repeatable)")
    p.add_argument("--skip-scenario", action="append", default=None, metavar="NAME", type=known,
                   help="a scenario not to run (repeatable)")
    p.add_argument("--seed", type=validate.seed, default=None,
                   help="base seed of the randomised parts (default: a random one, printed at the start)")
    p.add_argument("--budget", type=validate.budget, default=60.0, help="seconds of random exploration per scenario")
    add_common(p)
    add_search_options(p)
    p.set_defaults(func=_later("cmd_run"))

    p = sub.add_parser("replay", help="replay one schedule (or the schedule of a seed)")
    p.add_argument("--scenario", required=True, type=known)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--schedule", type=validate.schedule_text,
                   help=f"faults, e.g. 'email:effect.applied:kill' (at most {validate.MAX_FAULTS})")
    g.add_argument("--seed", type=validate.seed, help="the seed whose schedule to replay")
    add_common(p)
    p.set_defaults(func=_later("cmd_replay"), budget=60.0, shard=None, no_store=False, allow_empty_shard=False)

    p = sub.add_parser("explore", help="explore faults: every single fault, or N random schedules")
    p.add_argument("--scenario", required=True, type=known)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--exhaustive", action="store_true",
                   help="every step x point x action, one fault each (at each time the crash-free run reached "
                        "the point, up to 5)")
    g.add_argument("--random", type=validate.count, metavar="N",
                   help="N random multi-fault schedules, no two alike (fewer where the agent's fault points give "
                        "fewer)")
    p.add_argument("--seed", type=validate.seed, default=None,
                   help="base seed for --random (default: a random one, printed at the start)")
    add_common(p)
    add_search_options(p)
    p.set_defaults(func=_later("cmd_explore"), budget=60.0)

    p = sub.add_parser("scenarios", help="list the scenarios")
    p.set_defaults(func=cmd_scenarios)

    p = sub.add_parser("report", help="write an HTML timeline of a run directory")
    p.add_argument("run_dir", help="a directory under .killpoint/runs/")
    p.set_defaults(func=_later("cmd_report"))

    p = sub.add_parser("judge", help="judge a run directory again, offline, from its stored history")
    p.add_argument("run_dir", help="a directory under .killpoint/runs/")
    p.set_defaults(func=_later("cmd_judge"))


def cmd_scenarios(args: argparse.Namespace) -> int:
    """The registered scenarios, a line each, read from their modules' source (`run.catalog`)."""
    from killpoint.run.catalog import entries  # noqa: PLC0415 - read from source, nothing heavy

    for name, entry in entries().items():
        print(f"{name:<26} {entry.summary}")
    return 0
