"""``Services``: the fakes started together in this process, for the harness and for tests.

::

    from killpoint.fake_services import Services, Decision
    with Services.start(hook=None) as svc:   # mailer (+ webhook), ledger, model, stripe, resend, openai; free ports
        base = svc.url("ledger", "r-1")             # http://127.0.0.1:PORT/runs/r-1
        ...
        svc.attempts("r-1"); svc.effects("r-1"); svc.model_requests("r-1")
        svc.set_faults({"model": {"overload_next": 2}})
        svc.reset()

    # and a recording proxy per upstream a fake does not stand in for (see ``proxy.py``)
    with Services.start(upstreams={"sms": "http://127.0.0.1:9000/api"}) as svc:
        svc.url("sms", "r-1")                       # http://127.0.0.1:PORT/runs/r-1 -> .../api
        svc.env("r-1")["KILLPOINT_EFFECT_SMS_URL"]  # the same, for the worker
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from . import admin, ledger, mailer, model, openai_api, resend_api, stripe_api
from .cassette import Cassette
from .hooks import Hook
from .proxy import ProxyServer, Upstream, upstream
from .script import load_script
from .server import FakeServer, Route
from .state import State

SERVERS: dict[str, Mapping[str, Route]] = {
    "mailer": mailer.ROUTES, "ledger": ledger.ROUTES, "model": model.ROUTES,
    "stripe": stripe_api.ROUTES, "resend": resend_api.ROUTES, "openai": openai_api.ROUTES,
}
"""The servers by name, with their routes. The webhook is served by the mailer's server."""

SERVICE_SERVER: dict[str, str] = {
    "mailer": "mailer", "webhook": "mailer", "ledger": "ledger", "model": "model",
    "stripe": "stripe", "resend": "resend", "openai": "openai",
}
"""Which server serves each service."""

UNKNOWN = {"stripe": stripe_api.unknown, "resend": resend_api.unknown}
"""The servers that answer a route they do not serve in their API's own words (else a plain 404 / 405)."""


def build_server(name: str, state: State, host: str = "127.0.0.1", port: int = 0) -> FakeServer:
    """One fake server, bound (``OSError`` if the port is taken) but not serving yet."""
    if name not in SERVERS:
        raise ValueError(f"unknown fake {name!r}; expected one of {', '.join(SERVERS)}")
    return FakeServer(name, SERVERS[name], state, host, port, unknown=UNKNOWN.get(name))


class Services:
    """The running fakes (see the module docstring). Stop them with :meth:`stop` or a ``with`` block."""

    def __init__(self, servers: dict[str, FakeServer], state: State,
                 upstreams: Mapping[str, Upstream] | None = None) -> None:
        self.servers = servers
        self.state = state
        self.upstreams: dict[str, Upstream] = dict(upstreams or {})
        """The upstreams behind a recording proxy, by name (each served by the server of that name)."""

    @classmethod
    def start(cls, hook: Hook | None = None, host: str = "127.0.0.1",
              upstreams: Mapping[str, str] | None = None, script: Any = None,
              cassette: Cassette | None = None) -> Services:
        """Start every fake (the mailer also serves the webhook) on free ports, sharing one state, and a
        recording proxy (``proxy.py``) for each of ``upstreams`` (name -> base URL; ``ValueError`` for a bad
        name or URL). ``script``: how the model fakes answer (anything ``script.load_script`` takes; None:
        the script ``KILLPOINT_MODEL_SCRIPT`` names, else the default policy; ``ScriptError`` if unreadable).
        ``cassette``: recorded answers replayed after the script's (``cassette.py``; None: the cassette
        ``KILLPOINT_MODEL_CASSETTE`` names, else none; ``CassetteError`` if unreadable)."""
        ups = {name: upstream(name, url, tuple(SERVICE_SERVER)) for name, url in (upstreams or {}).items()}
        state = State(hook, None if script is None else load_script(script), cassette)
        servers: dict[str, FakeServer] = {}
        try:
            for name in SERVERS:
                servers[name] = build_server(name, state, host).start()
            for name, up in ups.items():
                servers[name] = ProxyServer(up, state, host).start()
        except BaseException:
            for server in servers.values():
                server.stop()
            raise
        return cls(servers, state, ups)

    def base_url(self, service: str) -> str:
        """The root URL of the server serving ``service`` (where ``/_admin/`` lives); an upstream's proxy too."""
        if service in self.upstreams:
            return self.servers[service].base_url
        if service not in SERVICE_SERVER:
            raise ValueError(f"unknown service {service!r}; expected one of "
                             f"{', '.join([*SERVICE_SERVER, *self.upstreams])}")
        return self.servers[SERVICE_SERVER[service]].base_url

    def url(self, service: str, run_id: str) -> str:
        """The per-run base URL: requests under it are attributed to ``run_id`` (``/runs/<run_id>``)."""
        return f"{self.base_url(service)}/runs/{quote(run_id, safe='')}"

    def env(self, run_id: str, api_key: str = "killpoint-fake-key") -> dict[str, str]:
        """The worker environment variables naming this run's services (contracts.md section 2).

        The SDKs read some of them themselves: ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY`` (anthropic),
        ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` (openai), ``RESEND_API_URL``/``RESEND_API_KEY`` (resend, once, at
        import). The stripe SDK reads none: a worker sets ``stripe.api_base = os.environ["STRIPE_BASE_URL"]``
        and its key from ``STRIPE_API_KEY``. ``RESEND_BASE_URL`` is the same URL as ``RESEND_API_URL``.
        Each upstream behind a proxy: ``KILLPOINT_EFFECT_<NAME>_URL``, the proxy's run URL.
        """
        resend_url = self.url("resend", run_id)
        return {
            "MAILER_URL": self.url("mailer", run_id), "LEDGER_URL": self.url("ledger", run_id),
            "WEBHOOK_URL": self.url("webhook", run_id), "ANTHROPIC_BASE_URL": self.url("model", run_id),
            "ANTHROPIC_API_KEY": api_key,
            "STRIPE_BASE_URL": self.url("stripe", run_id), "STRIPE_API_KEY": api_key,
            "RESEND_BASE_URL": resend_url, "RESEND_API_URL": resend_url, "RESEND_API_KEY": api_key,
            "OPENAI_BASE_URL": self.url("openai", run_id) + "/v1", "OPENAI_API_KEY": api_key,
            **{up.env_var: self.url(name, run_id) for name, up in self.upstreams.items()},
        }

    @property
    def ports(self) -> dict[str, int]:
        return {name: server.port for name, server in self.servers.items()}

    def attempts(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every request to every service (reads excepted), in arrival order (see ``journal.py``)."""
        return self.state.journal.attempts(run_id)

    def effects(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every applied effect, in order."""
        return self.state.journal.effects(run_id)

    def model_requests(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every model request, with its messages and answer."""
        return self.state.journal.model_requests(run_id)

    def reset(self, run_id: str | None = None) -> None:
        """Forget one run; or (no run) all records, the arrival counter and the static faults."""
        admin.reset(self.state, run_id)

    def forget(self, run_id: str) -> bool:
        """Forget a judged run's records and keys, unless it bills in a shared account (``journal.py``):
        then another run may still replay its keys, and it is kept; whether it was forgotten."""
        if not self.state.journal.forget(run_id):
            return False
        self.state.sampling.forget(run_id)
        return True

    def share_account(self, account: str, run_ids: list[str]) -> None:
        """Bill ``run_ids`` in one provider account: one idempotency key space per service (``journal.py``)."""
        self.state.journal.share_account(account, list(run_ids))

    def sample(self, run_id: str, seed: int) -> None:
        """The model answers a request ``run_id`` repeats differently, from ``seed`` (``sampling.py``)."""
        self.state.sampling.sample(run_id, seed)

    def pin_answers(self, run_id: str, answers: Mapping[str, str]) -> None:
        """The model answers ``run_id``'s requests of these digests with these texts (``sampling.py``)."""
        self.state.sampling.pin(run_id, dict(answers))

    def set_faults(self, faults: Mapping[str, Mapping[str, int]]) -> None:
        """Set static faults for the services named (shape in ``faults.py``); ``ValueError`` if malformed."""
        self.state.faults.set(faults)

    def faults(self) -> dict[str, dict[str, int]]:
        return self.state.faults.snapshot()

    def set_hook(self, hook: Hook | None) -> None:
        """Replace the hook (None: no hook). Requests already held keep the hook they were given."""
        self.state.hook = hook

    def set_script(self, script: Any) -> None:
        """Replace the model script (anything ``script.load_script`` takes; None: the default policy alone)."""
        self.state.script = load_script(script)

    def stop(self) -> None:
        """Stop every server: close the listening sockets and open connections, join the threads."""
        for server in self.servers.values():
            server.stop()

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
