"""``killpoint record``: run a killpoint command with the model fakes recording a real model's answers.

::

    killpoint record --cassette answers.jsonl --upstream https://api.anthropic.com \\
        run --steps mymodule --scenario crash-points
    KILLPOINT_MODEL_CASSETTE=answers.jsonl killpoint run --steps mymodule      # replay, no network

1. ``--cassette`` names the file, ``--upstream`` the Anthropic API root and ``--openai-upstream`` the
   OpenAI one (``https://api.openai.com/v1``); at least one upstream, and a command, are required (else a
   usage error, exit 2). The keys sent upstream are this process's ``ANTHROPIC_API_KEY`` /
   ``OPENAI_API_KEY`` (the workers get the fakes' key); no key is ever written to the cassette.
2. The cassette variables (``killpoint.fake_services.cassette``) are set in this process's environment, in
   mode ``record``, for as long as the command runs: every fake it starts answers a request missing from
   the cassette from the upstream and appends it (the crash-free run asks first; the trials find its
   answers). A cassette that cannot be read is a usage error before anything runs.
3. The command (any killpoint command, with its own options) runs; its exit code is the result.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from killpoint.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="run a killpoint command while the model fakes record a real model's "
                                      "answers into a cassette")
    p.add_argument("--cassette", required=True, metavar="FILE", help="the cassette (JSON Lines; appended to)")
    p.add_argument("--upstream", default=None, metavar="URL",
                   help="the Anthropic API to record from, e.g. https://api.anthropic.com")
    p.add_argument("--openai-upstream", default=None, metavar="URL",
                   help="the OpenAI API to record from, e.g. https://api.openai.com/v1")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the killpoint command to run, e.g. run --steps M")
    p.set_defaults(func=cmd_record, commands=sub)


def cmd_record(args: argparse.Namespace) -> int:
    """Flow steps 1-3 of the module docstring."""
    if not args.upstream and not args.openai_upstream:
        raise UsageError("no-upstream", "killpoint record needs the real API to record from",
                         "pass --upstream https://api.anthropic.com or --openai-upstream https://api.openai.com/v1")
    command = [a for a in args.command if a != "--"]
    if not command or command[0] == "record":
        raise UsageError("no-command", "killpoint record needs a command to run while it records",
                         "add one after the options, e.g. run --steps mymodule --scenario crash-points")
    from killpoint.fake_services import cassette  # noqa: PLC0415 - the fakes' package, only when recording

    upstreams = {"model": args.upstream, "openai": args.openai_upstream}
    variables = {cassette.PATH_VAR: args.cassette, cassette.MODE_VAR: "record",
                 **{cassette.UPSTREAM_VARS[name]: url for name, url in upstreams.items() if url}}
    with environment(variables):
        try:
            cassette.from_environment()
        except cassette.CassetteError as exc:
            raise UsageError("bad-cassette", f"the cassette cannot be used: {exc}",
                             "fix or remove the file, or name another with --cassette") from None
        parser = args.commands.choices.get(command[0])
        if parser is None:
            raise UsageError("no-command", f"unknown command {command[0]!r}", "run killpoint --help for the commands")
        inner = parser.parse_args(command[1:])
        return int(inner.func(inner) or 0)


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` set in ``os.environ`` for the block, then put back as they were."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
