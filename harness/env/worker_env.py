"""The environment of one incarnation (docs/contracts.md section 2): where its database and the fake
services are, the fake credentials it holds, and the knobs the reference runtime reads.

The run layer passes its `RunOptions`; this module needs only the `WorkerKnobs` it reads, so the
environment layer never imports the run layer.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Protocol

from killpoint.env import credentials, egress
from killpoint.env.fakes_env import service_env, worker_pythonpath
from killpoint.env.postgres import conninfo, libpq_env

if TYPE_CHECKING:
    from killpoint.env.environment import Environment


class WorkerKnobs(Protocol):
    """What an incarnation's environment is made of, besides the session (a `RunOptions` is one)."""

    lease_seconds: float
    drain_seconds: float
    step_delay: float
    slow_steps: tuple[str, ...]
    params: dict
    extra_env: dict[str, str]


def incarnation_env(env: Environment, inc: str, run_id: str | None, options: WorkerKnobs,
                    steps_module: str) -> dict[str, str]:
    """The environment of one incarnation (docs/contracts.md section 2).

    With `run_id` None the incarnation is a queue worker serving many runs: its service URLs carry the
    `{run_id}` slot that the runtime fills in per run, so each request still lands under its run's prefix.
    """
    # libpq's variables are the user's settings for the user's servers: on one killpoint owns they go
    out = credentials.scrubbed(os.environ if not env.pg.owned else libpq_env.without(os.environ))
    out.update({
        "DATABASE_URL": conninfo.for_worker(env.pg.dsn, inc),  # PGOPTIONS/PGAPPNAME yield to the DSN's
        **service_env(env.services, run_id),
        egress.ALLOW_VAR: env.egress_allowed,
        "KILLPOINT_SOCKET": str(env.socket_path),
        "KILLPOINT_INCARNATION": inc,
        "KILLPOINT_RUN_ID": run_id or "",
        "KILLPOINT_STEPS": steps_module,
        "KILLPOINT_PARAMS": json.dumps(options.params, sort_keys=True),
        "KILLPOINT_WORKER_ID": inc,
        "KILLPOINT_LEASE_SECONDS": str(options.lease_seconds),
        "KILLPOINT_DRAIN_SECONDS": str(options.drain_seconds),
        "KILLPOINT_STEP_DELAY": str(options.step_delay),
        "KILLPOINT_SLOW_STEPS": ",".join(options.slow_steps),
        "PGAPPNAME": inc,
        "PGOPTIONS": pg_options(out.get("PGOPTIONS"), inc),
        "PYTHONPATH": worker_pythonpath(out.get("PYTHONPATH")),
    })
    out.update(options.extra_env)
    return out


def pg_options(existing: str | None, inc: str) -> str:
    """PGOPTIONS naming the incarnation in a session setting (`killpoint.inc`) that the audit trail reads
    when a framework overrides `application_name`; the user's own options are kept."""
    value = inc.replace("\\", "\\\\").replace(" ", "\\ ")
    return " ".join(p for p in (existing, f"-c killpoint.inc={value}") if p)
