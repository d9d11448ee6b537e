"""The ``killpoint`` command.

Subcommands are registered in one place, ``REGISTRARS``: each entry is a function that adds its parsers to
the argparse sub-parser set and gives each one ``func`` (``args -> exit code``). ``main`` turns a
``KillpointError`` into its one line on stderr and exit 2, Ctrl-C into exit 130 (after the ``with`` blocks
of the command have cleaned up), and SIGTERM into the same orderly exit (143).
"""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from killpoint import __version__
from killpoint.cli import signals, validate
from killpoint.cli.args import add_postgres_options
from killpoint.cli.merge import add_parser as add_merge
from killpoint.cli.record import add_parser as add_record
from killpoint.env.postgres import KINDS
from killpoint.errors import EnvironmentProblem, KillpointError

OUTPUT_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.ENAMETOOLONG, errno.EIO})
"""The errors of a file killpoint writes (a run directory, JUnit) that the user's disk or path caused."""


def write_failed(exc: OSError) -> KillpointError:
    """An output file that could not be written (a disk filled up mid-run, a read-only remount) as one line."""
    where = f" {exc.filename}" if exc.filename else ""
    return EnvironmentProblem("write-failed", f"could not write{where}: {exc.strerror or exc}; what was judged "
                              "before is in the run directory, as far as the disk took it",
                              "free some space (or fix the file system), then run again, or give --out and "
                              "--junit paths on another file system")


class ThreadWrites:
    """A thread's output error (a disk that filled up under the thread that journals a worker's end) said once,
    by the main thread, as one line: the hook keeps the first such error instead of a thread's traceback,
    and passes any other exception to the previous hook."""

    def __init__(self) -> None:
        self.failed: OSError | None = None
        self._previous = threading.excepthook

    def __enter__(self) -> ThreadWrites:
        threading.excepthook = self._hook
        return self

    def __exit__(self, *exc: object) -> None:
        threading.excepthook = self._previous

    def _hook(self, args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, OSError) and args.exc_value.errno in OUTPUT_ERRORS:
            self.failed = self.failed or args.exc_value
            return
        self._previous(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    from killpoint.cli import doctor  # noqa: PLC0415

    return doctor.run(args.postgres, dsn=args.dsn, allow_any_dsn=args.allow_any_dsn)


def add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="what this machine offers; start, crash and stop a throwaway Postgres")
    add_postgres_options(p)
    p.set_defaults(func=cmd_doctor)


def cmd_serve(args: argparse.Namespace) -> int:
    from killpoint.cli import serve  # noqa: PLC0415

    return serve.run(args.postgres, say=lambda line: print(line, flush=True))


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="keep preloaded zygotes and a Postgres running, so that a session's "
                                     "start-up is paid once (the edit loop; Ctrl-C stops it)")
    p.add_argument("--postgres", default="auto", choices=[k for k in KINDS if k != "dsn"],
                   help="provider of the served Postgres (default auto)")
    p.set_defaults(func=cmd_serve)


def add_suite_commands(sub: argparse._SubParsersAction) -> None:
    """run, replay, explore, scenarios, report, judge: parsed by ``killpoint.cli.parsers``, run by
    ``killpoint.cli.commands`` (imported only by the command that runs)."""
    from killpoint.cli import parsers  # noqa: PLC0415

    parsers.add_parsers(sub)


# The one place subcommands are registered.
REGISTRARS: list[Callable[[argparse._SubParsersAction], None]] = [add_doctor, add_serve, add_suite_commands, add_merge,
                                                                   add_record]


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
    with ThreadWrites() as threads:
        code = _main(argv, restore)
    if threads.failed is not None and code in (0, 1):  # the verdicts stand on a history the disk cut short
        print(write_failed(threads.failed).line(), file=sys.stderr)
        return 2
    return code


def _main(argv: Sequence[str] | None, restore: Callable[[], None]) -> int:
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
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRORS:
            raise
        print(write_failed(exc).line(), file=sys.stderr)
        return 2
    except SystemExit as exc:
        if exc.code in (128 + signal.SIGTERM,):
            print("killpoint: terminated; cleaned up", file=sys.stderr)
        raise
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
