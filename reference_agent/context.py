"""What a step gets besides the checkpoint (:class:`StepContext`) and what it gives back (:class:`StepResult`).

:class:`Resources` holds the worker's long-lived clients (HTTP pool, model SDK, database connection) and
hands each step a :class:`StepContext` bound to that step's run, cursor and seq.

:func:`warm` does, once in a process that will fork workers (the harness's fork server), what each worker
would otherwise do on its first model call, and builds the HTTP clients of one plain-http worker ahead:
the forked worker's :class:`Resources` takes them instead of building its own. :func:`build_ahead` does, in
a process forked ahead of the worker it will become (the fork server's standby), what that worker's
:class:`Resources` would do first: build the SDK's client on those clients.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx2
import psycopg

from .checkpoint import Message
from .clients import DEFAULT_MODEL, Ledger, Mailer, ModelClient, RetryPolicy, Webhook
from .done_keys import DoneKeys
from .store import InTxn

if TYPE_CHECKING:  # built on first use (`Resources.sdk`)
    import anthropic

Point = Callable[[str], None]


RUN_ID_SLOT = "{run_id}"
"""In a service URL, stands for the run a step belongs to (see :func:`for_run`)."""


def for_run(url: str, run_id: str) -> str:
    """``url`` with every ``{run_id}`` replaced by ``run_id`` (percent-encoded); unchanged without one.

    A queue worker serves many runs with one environment; a URL template such as
    ``http://host/runs/{run_id}`` lets each run's requests reach a per-run endpoint.
    """
    return url.replace(RUN_ID_SLOT, quote(run_id, safe="")) if RUN_ID_SLOT in url else url


def idempotency_key(run_id: str, cursor: str) -> str:
    """The key of a step's effect: the run and the step, never the seq (a replay must repeat the key)."""
    return f"{run_id}:{cursor}"


@dataclass(frozen=True)
class StepResult:
    """What a step returns.

    ``cursor``: the next step (``"done"`` to finish). ``state``: a patch merged into the state (top-level
    keys replace). ``window``: the model context to keep (None keeps the current one). ``cost_usd``: what
    the step spent. ``in_txn``: a write to commit in the checkpoint's own transaction; it is rolled back
    with the checkpoint if the write is fenced or the worker dies before COMMIT.
    """

    cursor: str
    state: dict[str, Any] = field(default_factory=dict)
    window: list[Message] | None = None
    cost_usd: float = 0.0
    in_txn: InTxn | None = None


@dataclass(frozen=True)
class StepContext:
    """Everything a step may use to act on the world, bound to one step of one run.

    ``idempotency_key`` is ``f"{run_id}:{cursor}"``; pass it (or something derived from it) to every
    externally visible effect. The service clients report the ``effect.responded`` kill point themselves;
    ``point(name)`` reports any other point for this step.
    """

    run_id: str
    cursor: str
    seq: int
    idempotency_key: str
    model: ModelClient
    mailer: Mailer
    ledger: Ledger
    webhook: Webhook
    done_keys: DoneKeys
    point: Point


def _plain(url: str) -> bool:
    """Whether `url` is plain HTTP (no TLS to verify)."""
    return url.lower().startswith("http://")


PROXY_VARS = frozenset({"http_proxy", "https_proxy", "all_proxy"})
"""Environment variables an httpx client reads when it is built (``trust_env``): a client built ahead, in
another environment, is used only where neither environment sets any of them."""


def _proxied(env: Mapping[str, str]) -> bool:
    return any(name.lower() in PROXY_VARS for name in env)


def _service_http(verify: bool) -> httpx2.Client:
    return httpx2.Client(timeout=httpx2.Timeout(30.0, connect=5.0), verify=verify)


_spare: list[tuple[httpx2.Client, httpx2.Client | None]] = []
"""HTTP clients built by :func:`warm` for one plain-http worker: (services, model: None when `warm` left the
SDK out). Each set is taken once."""


def warm(sdk: bool = True) -> None:
    """Do before forking what every worker would otherwise pay for per process (30-40 ms of CPU each): the
    SDK builds the pydantic schemas of its response types, its tracer and its headers on its first call,
    and those of its error types on the first error it raises (~30 ms: a fault that outlasts its retries),
    so one call and one overloaded answer are made here against an in-memory transport (no socket, no
    thread); the idna codec a first connection imports is imported; and one set of plain-http clients is
    built ahead (see :class:`Resources`). Without `sdk`, the SDK is neither imported nor called, and only the services'
    client is built ahead (for workers whose steps never call the model). Idempotent; meant for a process
    that forks workers and never uses the clients."""
    import encodings.idna  # noqa: F401, PLC0415 - imported by the first getaddrinfo of a str host

    if not sdk:
        if not _spare and not _proxied(os.environ):
            _spare.append((_service_http(False), None))
        return
    import anthropic  # noqa: PLC0415 - see Resources

    def answer(request: httpx2.Request) -> httpx2.Response:
        if b"warm-error" in request.content:  # the API's error shape: the SDK builds its error types' schemas
            return httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "warm"}})
        return httpx2.Response(200, json={
            "id": "msg_warm", "type": "message", "role": "assistant", "model": DEFAULT_MODEL,
            "content": [{"type": "text", "text": "warm"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}})

    with httpx2.Client(transport=httpx2.MockTransport(answer)) as http:
        sdk = anthropic.Anthropic(base_url="http://warm.invalid", api_key="warm", http_client=http, max_retries=0)
        ModelClient(sdk).ask([{"role": "user", "content": "warm"}])
        with contextlib.suppress(anthropic.APIStatusError):
            ModelClient(sdk).ask([{"role": "user", "content": "warm-error"}])
    if not _spare and not _proxied(os.environ):
        _spare.append((_service_http(False), anthropic.DefaultHttpxClient(verify=False)))


def _take_spare(env: Mapping[str, str]) -> tuple[httpx2.Client, httpx2.Client | None] | None:
    return _spare.pop() if _spare and not _proxied(env) else None


SDK_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_WEBHOOK_SIGNING_KEY", "ANTHROPIC_CUSTOM_HEADERS")
"""The variables the SDK's client reads when it is built (besides the base URL, which a client built ahead
is given afterwards) or that `Resources` builds it from: one built ahead is used only where they agree."""

_ahead: list[tuple[tuple, httpx2.Client, anthropic.Anthropic]] = []
"""What :func:`build_ahead` made: (what it was built from, the services' client, the SDK's client)."""


def _ahead_key(env: Mapping[str, str], model_retries: int) -> tuple:
    return (model_retries, *(env.get(name) for name in SDK_ENV))


def _plain_only(env: Mapping[str, str]) -> bool:
    """Whether every service and the model are reached over plain http: the only case a worker takes the
    clients built ahead (see `Resources`)."""
    urls = [env.get(var, "") for var in ("MAILER_URL", "LEDGER_URL", "WEBHOOK_URL")]
    model = env.get("ANTHROPIC_BASE_URL") or ""
    return all(_plain(u) for u in urls if u) and bool(model) and _plain(model)


def build_ahead(model_retries: int = 3) -> None:
    """In a standby (a worker forked ahead of its spawn, harness/env/forkserver.py), whose environment is
    the one it was forked with (the previous spawn's): build the SDK's client that the next worker's
    :class:`Resources` builds before its first step, on the spare HTTP clients :func:`warm` left, so that
    the incarnation that takes the standby finds it made (about a millisecond of a fresh child's page
    faults, moved before the kill). It is given its own base URL when taken (`Resources`): the only
    setting that differs from one run to the next. Only where the SDK is imported already (the fork
    server imported it: a step may call the model), a spare set with the model's client is left, and
    everything is plain http; at most once. The client is taken only where `SDK_ENV` agrees."""
    env = os.environ  # what the SDK's client reads as it is built
    if _ahead or "anthropic" not in sys.modules or not _plain_only(env) or not _spare or _spare[-1][1] is None:
        return
    spare = _take_spare(env)
    if spare is None or spare[1] is None:
        return
    sdk = _new_sdk(env.get("ANTHROPIC_BASE_URL") or None, env.get("ANTHROPIC_API_KEY") or "test", model_retries,
                   spare[1])
    _ahead.append((_ahead_key(env, model_retries), spare[0], sdk))


def _take_ahead(env: Mapping[str, str], model_retries: int) -> tuple[httpx2.Client, anthropic.Anthropic] | None:
    if not _ahead or _proxied(env) or _ahead[-1][0] != _ahead_key(env, model_retries):
        return None
    _, http, sdk = _ahead.pop()
    return http, sdk


def _new_sdk(base_url: str | None, api_key: str, model_retries: int,
             http: httpx2.Client | None) -> anthropic.Anthropic:
    import anthropic  # noqa: PLC0415 - see Resources._build_sdk

    return anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=model_retries, timeout=60.0,
                               **({"http_client": http} if http is not None else {}))


class Resources:
    """The worker's clients, created once per process (never at import: the fork server forks after import).

    Service URLs come from ``MAILER_URL``, ``LEDGER_URL``, ``WEBHOOK_URL``; the model from
    ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` (``KILLPOINT_MODEL`` picks the model name). Any of the
    URLs may hold ``{run_id}``, filled in per run by :meth:`context` (:func:`for_run`).
    """

    def __init__(self, conn: psycopg.Connection, env: Mapping[str, str] | None = None,
                 retry: RetryPolicy | None = None, model_retries: int = 3) -> None:
        env = os.environ if env is None else env
        self.conn = conn
        self.urls = {name: env.get(var, "") for name, var in
                     (("mailer", "MAILER_URL"), ("ledger", "LEDGER_URL"), ("webhook", "WEBHOOK_URL"))}
        self.retry = retry or RetryPolicy()
        # A client that will only ever speak plain http:// skips loading the CA bundle (20-30 ms per client,
        # once per incarnation): no TLS is negotiated, so there is nothing to verify. https:// verifies.
        plain = all(_plain(u) for u in self.urls.values() if u)
        self._model_base = env.get("ANTHROPIC_BASE_URL") or None
        self._plain_model = bool(self._model_base and _plain(self._model_base))
        self._api_key = env.get("ANTHROPIC_API_KEY") or "test"
        self._model_retries = model_retries
        self._sdk: anthropic.Anthropic | None = None
        self._model_http: httpx2.Client | None = None
        ahead = _take_ahead(env, model_retries) if plain and self._plain_model else None  # `build_ahead`
        if ahead is not None:
            self.http, self._sdk = ahead
            self._sdk.base_url = self._model_base or ""
        else:
            spare = _take_spare(env) if plain and self._plain_model else None  # built before the fork (`warm`)
            self.http = spare[0] if spare else _service_http(not plain)
            self._model_http = spare[1] if spare else None
        self.model = ModelClient(self._build_sdk, env.get("KILLPOINT_MODEL") or DEFAULT_MODEL)
        self.model_url = env.get("ANTHROPIC_BASE_URL") or ""
        self._run_models: dict[str, ModelClient] = {}
        self.done_keys = DoneKeys(conn)

    @property
    def sdk(self) -> anthropic.Anthropic:
        """The SDK's client, built on first use (a worker whose steps never call the model never imports it)."""
        return self._build_sdk()

    def _build_sdk(self) -> anthropic.Anthropic:
        if self._sdk is None:
            # Here, not at the top: a reader of the agent's STEPS (the harness) and a worker that never calls
            # the model need not pay ~1.2 s for the SDK; a fork server has it imported already (`warm`).
            import anthropic  # noqa: PLC0415

            http = self._model_http
            if http is None and self._plain_model:
                http = anthropic.DefaultHttpxClient(verify=False)
            self._sdk = _new_sdk(self._model_base, self._api_key, self._model_retries, http)
        return self._sdk

    def _model_for(self, run_id: str) -> ModelClient:
        """The model client of ``run_id``: the shared one, or a copy at the run's URL (same HTTP pool)."""
        if RUN_ID_SLOT not in self.model_url:
            return self.model
        if run_id not in self._run_models:
            url = for_run(self.model_url, run_id)
            self._run_models[run_id] = ModelClient(lambda: self.sdk.with_options(base_url=url),
                                                   self.model.model, self.model.max_tokens)
        return self._run_models[run_id]

    def context(self, run_id: str, cursor: str, seq: int, point: Point) -> StepContext:
        def responded() -> None:
            point("effect.responded")

        return StepContext(
            run_id=run_id, cursor=cursor, seq=seq, idempotency_key=idempotency_key(run_id, cursor),
            model=self._model_for(run_id),
            mailer=Mailer(self.http, for_run(self.urls["mailer"], run_id), responded, self.retry),
            ledger=Ledger(self.http, for_run(self.urls["ledger"], run_id), responded, self.retry),
            webhook=Webhook(self.http, for_run(self.urls["webhook"], run_id), responded, self.retry),
            done_keys=self.done_keys, point=point)

    def close(self) -> None:
        self.http.close()
        if self._sdk is not None:
            self._sdk.close()
        elif self._model_http is not None:
            self._model_http.close()
