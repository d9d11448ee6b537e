"""The ``killpoint`` command.

Subcommands are registered in one place, ``REGISTRARS``: each entry is a function that adds its parsers to
the argparse sub-parser set and gives each one ``func`` (``args -> exit code``). ``main`` turns a
``KillpointError`` into its one line on stderr and exit 2, Ctrl-C into exit 130 (after the ``with`` blocks
of the command have cleaned up), and SIGTERM into the same orderly exit (143).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

from killpoint import __version__
from killpoint.cli import signals, validate
from killpoint.cli.args import add_postgres_options
from killpoint.cli.merge import add_parser as add_merge
from killpoint.errors import KillpointError


def cmd_doctor(args: argparse.Namespace) -> int:
    from killpoint.cli import doctor  # noqa: PLC0415

    return doctor.run(args.postgres, dsn=args.dsn, allow_any_dsn=args.allow_any_dsn)


def add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="what this machine offers; start, crash and stop a throwaway Postgres")
    add_postgres_options(p)
    p.set_defaults(func=cmd_doctor)


def add_suite_commands(sub: argparse._SubParsersAction) -> None:
    """run, replay, explore, scenarios, report: defined in ``killpoint.cli.commands``."""
    from killpoint.cli import commands  # noqa: PLC0415

    commands.add_parsers(sub)


# The one place subcommands are registered.
REGISTRARS: list[Callable[[argparse._SubParsersAction], None]] = [add_doctor, add_suite_commands, add_merge]


def parser() -> argparse.ArgumentParser:
    p = validate.Parser(prog="killpoint", description="Crash-testing harness for durable AI agents.")
    p.add_argument("--version", action="version", version=f"killpoint {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for register in REGISTRARS:
        register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``killpoint`` console script; returns the exit code."""
    restore = signals.install()  # the first Ctrl-C/SIGTERM stops the run; a burst never cuts its cleanup short
    try:
        p = parser()  # inside the try: it imports the suite, and a Ctrl-C there is still a clean 130
        args = p.parse_args(argv)
        validate.check_args(args)
        if getattr(args, "func", None) is None:
            p.print_help(sys.stderr)
            return 2
        return int(args.func(args) or 0)
    except KillpointError as exc:
        print(exc.line(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("killpoint: interrupted; cleaned up", file=sys.stderr)
        return 130
    except SystemExit as exc:
        if exc.code in (128 + signal.SIGTERM,):
            print("killpoint: terminated; cleaned up", file=sys.stderr)
        raise
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
