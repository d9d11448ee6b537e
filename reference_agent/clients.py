"""Clients for the outside world: the model, and the services a step has effects on.

- :class:`ModelClient`: the Anthropic Messages API through the ``anthropic`` SDK (base URL from
  ``ANTHROPIC_BASE_URL``); turns the usage it returns into dollars with :data:`PRICES`.
- :class:`Mailer` and :class:`Ledger`: downstreams with idempotency keys. A 5xx, 408 or 429 answer or a
  transport error is retried with the *same* key, so the service can recognise the repeat; other 4xx are
  final (:class:`EffectFailed`); retries running out raise :class:`ServiceUnavailable` or the transport error.
- :class:`Webhook`: a downstream without key support. It is retried only when the request surely never left
  (connection refused): retrying an ambiguous failure would repeat the effect.

Each effect client calls its ``responded`` hook once, right after the call returns the response that ends
it (the ``effect.responded`` kill point: the worker holds the answer, no checkpoint records it yet).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any

import httpx2

from .checkpoint import Message
from .pricing import CACHE_READ_FACTOR, CACHE_WRITE_FACTOR, DEFAULT_MODEL, PRICES  # noqa: F401 - re-exported
from .pricing import cost_usd as _priced

if TYPE_CHECKING:  # the SDK is imported where a client is built (context.py): ~1.2 s a reader of STEPS need not pay
    import anthropic


def cost_usd(model: str, usage: Any) -> float:
    """Dollars for one call, by the table of ``pricing.py`` (:data:`PRICES`; unknown models are priced as
    :data:`DEFAULT_MODEL`)."""
    return _priced(model, usage)


class EffectFailed(Exception):
    """A service answered with a final error (4xx): retrying with the same key will not help. The runtime
    checkpoints the run as ``failed``."""

    def __init__(self, service: str, status: int, body: str) -> None:
        super().__init__(f"{service} answered {status}: {body[:200]}")
        self.service = service
        self.status = status


class ServiceUnavailable(EffectFailed):
    """A service kept answering 5xx or 429 (or, without keys, answered it once): the effect may or may not
    have happened. Not a failure of the run: the worker stops with an error and the run is resumed later."""


TRANSIENT_STATUSES = frozenset({408, 429})


@dataclass(frozen=True)
class ModelReply:
    text: str
    message: Message
    """The answer as an assistant ``MessageParam``, ready to append to the window."""
    cost_usd: float


class ModelClient:
    """The model, through the anthropic SDK. Model calls have no external effect: no kill point here.

    ``sdk`` is the SDK's client, or a function that builds it: then it is built on first use (``.sdk``), so
    that a worker whose steps never call the model never imports the SDK."""

    def __init__(self, sdk: anthropic.Anthropic | Callable[[], anthropic.Anthropic], model: str = DEFAULT_MODEL,
                 max_tokens: int = 512) -> None:
        self._sdk: anthropic.Anthropic | None = None
        self._build: Callable[[], anthropic.Anthropic] | None = None
        if isinstance(sdk, FunctionType | MethodType):
            self._build = sdk
        else:
            self._sdk = sdk
        self.model = model
        self.max_tokens = max_tokens

    @property
    def sdk(self) -> anthropic.Anthropic:
        if self._sdk is None:
            assert self._build is not None
            self._sdk = self._build()
        return self._sdk

    def ask(self, window: list[Message]) -> ModelReply:
        """Send ``window`` as the messages; return the answer's text, as a message, and its cost."""
        response = self.sdk.messages.create(model=self.model, max_tokens=self.max_tokens, messages=window)
        text = "".join(getattr(block, "text", "") for block in response.content)
        return ModelReply(text=text, message={"role": "assistant", "content": text},
                          cost_usd=cost_usd(self.model, response.usage))


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    backoff_seconds: float = 0.05


class _HttpService:
    """POST JSON to one service, with the retry rule of the subclass."""

    name = "service"
    keyed = True

    def __init__(self, http: httpx2.Client, base_url: str, responded: Callable[[], None],
                 retry: RetryPolicy) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.responded = responded
        self.retry = retry

    def _retryable(self, exc: httpx2.TransportError) -> bool:
        return True

    def _post(self, path: str, body: dict[str, Any], key: str | None) -> dict[str, Any]:
        if not self.base_url:
            raise RuntimeError(f"no URL for the {self.name} (set {self.name.upper()}_URL)")
        headers = {"Idempotency-Key": key} if key is not None else {}
        for attempt in range(1, self.retry.attempts + 1):
            last = attempt == self.retry.attempts
            try:
                response = self.http.post(self.base_url + path, json=body, headers=headers)
            except httpx2.TransportError as exc:
                if last or not self._retryable(exc):
                    raise
            else:
                status = response.status_code
                if status in TRANSIENT_STATUSES or status >= 500:
                    if last or not self.keyed:
                        raise ServiceUnavailable(self.name, status, response.text)
                else:
                    self.responded()
                    if status >= 400:
                        raise EffectFailed(self.name, status, response.text)
                    return response.json() if response.content else {}
            time.sleep(self.retry.backoff_seconds * 2 ** (attempt - 1))
        raise AssertionError("unreachable")


class Mailer(_HttpService):
    """``POST {MAILER_URL}/v1/emails`` with an ``Idempotency-Key``."""

    name = "mailer"

    def send(self, to: str, template: str, data: dict[str, Any], key: str) -> dict[str, Any]:
        return self._post("/v1/emails", {"to": to, "template": template, "data": data}, key)


class Ledger(_HttpService):
    """``POST {LEDGER_URL}/v1/charges`` with an ``Idempotency-Key`` (422: same key, other payload)."""

    name = "ledger"

    def charge(self, account: str, amount_cents: int, currency: str, key: str) -> dict[str, Any]:
        return self._post("/v1/charges",
                          {"account": account, "amount_cents": amount_cents, "currency": currency}, key)


class Webhook(_HttpService):
    """``POST {WEBHOOK_URL}/v1/webhooks``: no idempotency key support downstream."""

    name = "webhook"
    keyed = False

    def _retryable(self, exc: httpx2.TransportError) -> bool:
        return isinstance(exc, httpx2.ConnectError)

    def post(self, event: str, data: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/webhooks", {"event": event, "data": data}, None)
