"""The harness's hook into the fake services: points and decisions.

A hook is ``hook(point, info) -> Decision | None``. It is called in the request's own thread and may
block as long as it likes (it is the harness's barrier: the request is held until it returns).
``None`` means ``Decision.GO``.

``point`` is one of :data:`POINTS`. ``info`` holds ``service`` (mailer | ledger | webhook | stripe | resend,
or the name of an upstream behind the recording proxy, at the effect points; model | openai at
``model.request``), ``run_id``, ``key``, ``path``, ``payload_digest``, ``headers`` (lower-case names) and
``order`` (the attempt's arrival number); ``step`` when the request names its step in a ``Killpoint-Step``
header; at ``effect.applied`` also ``effect_id``; at ``model.request`` also ``model`` and ``retry_count``.

What each action does, by point (errors in each API's own shape, so its SDK raises its own types):

=========== ============================== ================================ ==========================
action      effect.received                effect.applied                   model.request
=========== ============================== ================================ ==========================
go          go on                          send the response                answer
slow        sleep ``delay_ms``, go on      sleep, send the response         sleep, answer
error       503, nothing applied           500, the effect stays applied    500 (``api_error``;
                                                                            openai ``server_error``)
overload    as error (stripe, resend: 429  as error (stripe, resend: 429;   529 ``overloaded_error``
            rate limit), nothing applied   the proxy: 500), stays applied   (openai: 429)
drop        reset the connection, nothing  reset the connection, the effect reset the connection, no
            applied                        stays applied                    answer
=========== ============================== ================================ ==========================

Any action may carry ``delay_ms``: the service sleeps that long first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

POINTS: tuple[str, ...] = ("effect.received", "effect.applied", "model.request")
ACTIONS: tuple[str, ...] = ("go", "error", "drop", "slow", "overload")


@dataclass(frozen=True)
class Decision:
    """What a fake service does with a request held at a point (see the module's table)."""

    action: str = "go"
    delay_ms: int = 0

    GO: ClassVar[Decision]
    ERROR: ClassVar[Decision]
    DROP: ClassVar[Decision]
    OVERLOAD: ClassVar[Decision]

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}; expected one of {', '.join(ACTIONS)}")
        if not isinstance(self.delay_ms, int) or self.delay_ms < 0:
            raise ValueError(f"delay_ms must be a non-negative int, not {self.delay_ms!r}")

    @classmethod
    def slow(cls, delay_ms: int) -> Decision:
        """Add ``delay_ms`` of latency, then go on."""
        return cls("slow", delay_ms)


Decision.GO = Decision("go")
Decision.ERROR = Decision("error")
Decision.DROP = Decision("drop")
Decision.OVERLOAD = Decision("overload")

Hook = Callable[[str, dict[str, Any]], "Decision | None"]
