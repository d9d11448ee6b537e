"""Static faults: counters and latency set through the Python or HTTP admin interface.

Shape (every key optional; ``set`` replaces the settings of the services it names, leaves the others)::

    {"model":   {"overload_next": 2, "error_next": 1, "drop_next": 0, "delay_ms": 5, "retry_after_ms": 10},
     "openai":  {"overload_next": 1, "retry_after_ms": 10},
     "ledger":  {"error_next": 1, "drop_next": 1, "delay_ms": 0},
     "stripe":  {"overload_next": 1, "error_next": 1, "drop_next": 1},
     "mailer":  {...}, "webhook": {...}, "resend": {...}}

- ``error_next: N``: the next N requests are answered 5xx before anything is applied (503; model and
  openai 500).
- ``overload_next: N`` (model, openai, stripe, resend): the next N requests get the API's overload answer
  before anything is applied: model 529 ``overloaded_error``, openai, stripe and resend 429.
- ``drop_next: N``: the next N requests that apply an effect apply it, then the connection is reset;
  for the model and openai, the next N requests get a reset and no answer.
- ``error_applied_next: N`` (effect services): the next N requests that apply an effect apply it, then
  are answered 500: the ambiguous failure (``effect.applied:error``).
- ``overload_applied_next: N`` (stripe, resend): the next N requests that apply an effect apply it, then
  get the API's overload answer, 429 (``effect.applied:overload``).
- ``delay_ms: D``: every request waits D milliseconds on arrival.
- ``retry_after_ms: R`` (model, openai; default 10): sent as ``retry-after-ms`` with a 429/500/529, which
  the anthropic and openai SDKs obey instead of their 0.5 s-and-up backoff. 0 sends no header.

Counters count down as they fire; overload fires before error, error before drop (on arrival and after
applying alike). A hook's decision
other than ``go`` wins over the static faults, which are then left untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .hooks import Decision

SERVICES: tuple[str, ...] = ("mailer", "ledger", "webhook", "model", "stripe", "resend", "openai")
KEYS: tuple[str, ...] = ("error_next", "drop_next", "overload_next", "error_applied_next", "overload_applied_next",
                         "delay_ms", "retry_after_ms")
ONLY_FOR: dict[str, tuple[str, ...]] = {
    "overload_next": ("model", "openai", "stripe", "resend"),  # the services with an overload answer of their own
    "error_applied_next": ("mailer", "ledger", "webhook", "stripe", "resend"),  # the services that apply effects
    "overload_applied_next": ("stripe", "resend"),
    "retry_after_ms": ("model", "openai"),  # the SDKs that obey retry-after-ms
}
DEFAULT_RETRY_AFTER_MS = 10
ARRIVAL_POINTS: tuple[str, ...] = ("effect.received", "model.request")
AFTER_APPLYING: dict[str, str] = {"overload_applied_next": "overload", "error_applied_next": "error",
                                  "drop_next": "drop"}
"""The counters that fire at ``effect.applied``, in the order they are tried, and the action of each."""


def validate(faults: Any) -> dict[str, dict[str, int]]:
    """Check a fault mapping and return a clean copy; raise ``ValueError`` naming the first problem."""
    if not isinstance(faults, Mapping):
        raise ValueError("faults must be a JSON object keyed by service")
    clean: dict[str, dict[str, int]] = {}
    for service, settings in faults.items():
        if service not in SERVICES:
            raise ValueError(f"unknown service {service!r} in faults; expected one of {', '.join(SERVICES)}")
        if not isinstance(settings, Mapping):
            raise ValueError(f"faults[{service!r}] must be an object")
        clean[service] = {}
        for key, value in settings.items():
            if key not in KEYS:
                raise ValueError(f"unknown fault {key!r} for {service}; expected one of {', '.join(KEYS)}")
            if key in ONLY_FOR and service not in ONLY_FOR[key]:
                raise ValueError(f"fault {key!r} applies to {', '.join(ONLY_FOR[key])} only")
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"faults[{service!r}][{key!r}] must be a non-negative integer")
            clean[service][key] = value
    return clean


class Faults:
    """Thread-safe static fault settings, consumed by :meth:`take` as requests arrive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_service: dict[str, dict[str, int]] = {}

    def set(self, faults: Mapping[str, Mapping[str, int]]) -> None:
        """Replace the settings of each service named in ``faults`` (validated first, all or nothing)."""
        clean = validate(faults)
        with self._lock:
            self._by_service.update(clean)

    def clear(self) -> None:
        with self._lock:
            self._by_service.clear()

    def snapshot(self) -> dict[str, dict[str, int]]:
        """The current settings, with counters as they stand now."""
        with self._lock:
            return {service: dict(settings) for service, settings in self._by_service.items()}

    def retry_after_ms(self, service: str = "model") -> int:
        """The ``retry-after-ms`` a model service sends with a fault (0: none)."""
        with self._lock:
            return self._by_service.get(service, {}).get("retry_after_ms", DEFAULT_RETRY_AFTER_MS)

    def take(self, service: str, point: str) -> Decision:
        """The static decision for a request of ``service`` at ``point``, consuming a counter if one fires."""
        with self._lock:
            settings = self._by_service.get(service)
            if not settings:
                return Decision.GO
            delay = settings.get("delay_ms", 0) if point in ARRIVAL_POINTS else 0
            action = "go"
            if point in ARRIVAL_POINTS:
                order = ("overload_next", "error_next") + (("drop_next",) if point == "model.request" else ())
            else:
                order = tuple(AFTER_APPLYING)
            for counter in order:
                if settings.get(counter, 0) > 0:
                    settings[counter] -= 1
                    action = AFTER_APPLYING.get(counter) or counter.removesuffix("_next")
                    break
        if action == "go":
            return Decision.slow(delay) if delay else Decision.GO
        return Decision(action, delay)
