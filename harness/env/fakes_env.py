"""The variables that point a worker's SDKs at the fake services, and the environment the fork servers
import the agent under (`import_env`): the incarnations' own, less what only a run has (its database
session, its kill-point socket, its run id)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from killpoint.env import credentials, egress

if TYPE_CHECKING:
    from killpoint.fake_services import Services


def service_env(svc: Services, run_id: str | None) -> dict[str, str]:
    """The variables naming the fake services (and the SDKs' base-URL variables pointing at them) for
    `run_id`; with None, URLs with the `{run_id}` slot the reference runtime fills in per run (a queue
    worker's, and the fork server's while it imports the agent: a client an agent builds at import
    reaches the fakes too). `NO_PROXY` keeps a user's proxy out of the way to them."""

    def url(service: str) -> str:
        return svc.url(service, run_id) if run_id is not None else f"{svc.base_url(service)}/runs/{{run_id}}"

    return {
        "MAILER_URL": url("mailer"),
        "LEDGER_URL": url("ledger"),
        "WEBHOOK_URL": url("webhook"),
        "ANTHROPIC_BASE_URL": url("model"),
        "STRIPE_BASE_URL": url("stripe"),
        "RESEND_API_URL": url("resend"),
        "RESEND_BASE_URL": url("resend"),
        "OPENAI_BASE_URL": url("openai") + "/v1",
        "NO_PROXY": "127.0.0.1,localhost",
        **{up.env_var: url(name) for name, up in svc.upstreams.items()},  # --effect: the recording proxies
    }


def import_env(svc: Services, egress_allowed: str) -> dict[str, str]:
    """The environment the fork servers import the agent under: the shell's without its credentials
    (`credentials.scrubbed`), the fake keys, and the services' URLs (`service_env` without a run), as
    each incarnation it forks will have them."""
    return {**credentials.scrubbed(os.environ), **service_env(svc, None), egress.ALLOW_VAR: egress_allowed}


def worker_pythonpath(existing: str | None) -> str:
    """An incarnation's PYTHONPATH: the working directory, then the shell's `existing` one."""
    return os.pathsep.join(p for p in (os.getcwd(), existing) if p)
