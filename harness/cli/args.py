"""Options shared by several commands, defined once."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from killpoint.cli import validate
from killpoint.env.postgres import KINDS
from killpoint.env.stepmodule import DEFAULT_STEPS  # light: psycopg is imported on use only
from killpoint.errors import UsageError
from killpoint.run.config import MAX_JOBS


def add_postgres_options(p: argparse.ArgumentParser) -> None:
    """The Postgres provider options shared by every command that needs a server."""
    g = p.add_argument_group("postgres")
    g.add_argument("--postgres", default="auto", choices=KINDS, help="provider (default auto)")
    g.add_argument("--dsn", default=None, help="a test database to use instead of starting one")
    g.add_argument(
        "--allow-any-dsn", action="store_true", help="accept a DSN whose database name lacks 'test'"
    )




def jobs(text: str) -> int:
    """`--jobs/-j`: how many schedules of a scenario run at the same time, 1..64."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"jobs must be a whole number, not {text!r}") from None
    if not 1 <= value <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"jobs must be at least 1 and at most {MAX_JOBS}, not {text!r}")
    return value


def default_jobs() -> int:
    """The default of `--jobs`: the cores this process may use (its affinity, within its cgroup's CPU quota:
    `run.cores.usable`)."""
    from killpoint.run.cores import usable

    return usable()


def add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("environment")
    g.add_argument("-j", "--jobs", type=jobs, default=None, metavar="N",
                   help="schedules run at the same time, whichever scenario's: killpoint run runs the scenarios "
                        "that may share the machine side by side above 1 (default: the cores this process may use, "
                        "within its cgroup's CPU quota, and up to "
                        "4 per core while the cores idle); ids, verdicts and each scenario's lines are those of -j 1")
    g.add_argument("--steps", default=DEFAULT_STEPS, help=f"step module of the agent (default {DEFAULT_STEPS})")
    g.add_argument("--spawn", default="fork", choices=["fork", "exec"],
                   help="incarnations from a preloaded fork server (fast) or fresh interpreters")
    g.add_argument("--allow-egress", action="append", default=[], metavar="HOST", type=validate.egress_host,
                   help="a host a worker may reach besides loopback and the --dsn server (repeatable; '*': any); "
                        "see docs/contracts.md, 'Nothing leaves the machine'")
    g.add_argument("--worker-cmd", default=None, type=validate.worker_cmd, help="black-box worker command, e.g. 'node worker.js {run_id}'")
    g.add_argument("--worker-preload", default=None, metavar="MOD,...|none",
                   help="with a --worker-cmd that runs a Python script or -m module: the modules its fork servers "
                        "import before forking each incarnation (default: the libraries the script imports at "
                        "its top level; none: a fresh interpreter per incarnation; see docs/frameworks.md)")
    g.add_argument("--adapter", default=None, choices=["checkpoints", "langgraph", "dbos"],
                   help="with --worker-cmd: where the worker's framework keeps a run's progress "
                        "(default checkpoints, the seeds' table; see docs/frameworks.md)")
    g.add_argument("--exit-codes", default=None, choices=["killpoint", "none"],
                   help="hold the worker to killpoint's exit-code convention (0 drained, 4/5 fenced, 6 drain "
                        "deadline; the default without --worker-cmd) or to none (the default with it: drain "
                        "and fencing judged from effects and checkpoints)")
    g.add_argument("--actions", default=None, metavar="A,B",
                   help="only these fault actions, e.g. kill,term (scenarios left with none are skipped)")
    g.add_argument("--skip-checker", action="append", default=None, metavar="NAME",
                   help="a checker not to judge by (repeatable)")
    g.add_argument("--previous-steps", default=None, metavar="MODULE|git:REF",
                   help="the agent's previous code, for the schema scenarios: a step module, or git:REF (the "
                        "step module's package at that commit, e.g. git:HEAD~1, in a temp dir removed at the end); "
                        "default in a git checkout: the last commit that changed the step module")
    g.add_argument("--grace", type=validate.grace, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)")
    g.add_argument("--run-timeout", type=validate.run_timeout, default=60.0, metavar="SECONDS",
                   help="seconds one run may take before it is judged not done, naming where it hung (default 60; "
                        "raise it for an agent whose steps are slow by design)")
    g.add_argument("--out", default=".killpoint/runs", help="where run directories go")
    g.add_argument("--junit", default=None, help="also write JUnit XML here")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    g.add_argument("--effect", action="append", default=None, metavar="NAME=URL[,id=PATH]",
                   help="record the effects sent to an HTTP service through a proxy (repeatable); the worker "
                        "gets the run's URL in KILLPOINT_EFFECT_<NAME>_URL; id=PATH: where the service's "
                        "answers carry the object's id when not at 'id' (e.g. id=ticket.id), so a replayed key "
                        "is told from a second effect")
    add_postgres_options(p)


def effects_option(values: Sequence[str] | None, flag: str = "--effect") -> dict[str, str]:
    """`--effect NAME=URL[,id=PATH]` values as {name: "URL[,id=PATH]"} (what `Services.start` takes); a
    UsageError naming the first bad or repeated one (`flag`: the option's name as the user wrote it)."""
    from killpoint.fake_services.proxy import parse_effect
    from killpoint.fake_services.services import SERVICE_SERVER

    out: dict[str, str] = {}
    for text in values or ():
        try:
            up = parse_effect(text, tuple(SERVICE_SERVER))
        except ValueError as exc:
            raise UsageError("bad-effect", f"{flag} {text}: {exc}",
                             f"write {flag} NAME=URL[,id=PATH], e.g. {flag} sms=http://127.0.0.1:9000/api, with a "
                             "lower-case name that is not a fake's") from None
        if up.name in out:
            raise UsageError("bad-effect", f"{flag} {up.name} is given twice", "name each service once")
        out[up.name] = up.spec
    return out
