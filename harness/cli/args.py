"""Options shared by several commands, defined once."""

from __future__ import annotations

import argparse

from killpoint.env.postgres import KINDS
from killpoint.env.stepmodule import DEFAULT_STEPS


def add_postgres_options(p: argparse.ArgumentParser) -> None:
    """The Postgres provider options shared by every command that needs a server."""
    g = p.add_argument_group("postgres")
    g.add_argument("--postgres", default="auto", choices=KINDS, help="provider (default auto)")
    g.add_argument("--dsn", default=None, help="a test database to use instead of starting one")
    g.add_argument(
        "--allow-any-dsn", action="store_true", help="accept a DSN whose database name lacks 'test'"
    )


def add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("environment")
    g.add_argument("--steps", default=DEFAULT_STEPS, help=f"step module of the agent (default {DEFAULT_STEPS})")
    g.add_argument("--spawn", default="fork", choices=["fork", "exec"],
                   help="incarnations from a preloaded fork server (fast) or fresh interpreters")
    g.add_argument("--worker-cmd", default=None, help="black-box worker command, e.g. 'node worker.js {run_id}'")
    g.add_argument("--previous-steps", default=None,
                   help="the agent's previous code (a step module), for the schema scenarios")
    g.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)")
    g.add_argument("--out", default=".killpoint/runs", help="where run directories go")
    g.add_argument("--junit", default=None, help="also write JUnit XML here")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    add_postgres_options(p)
