"""Outages: a service fault that lasts. Pure: the driver says what arrived, this says whether it fails.

1. `start(run_id, service, action)` when an `outage` or `outage=N` fault fires on a request of `service`: that
   request fails (the driver answers it 5xx), and so do the run's next requests to the same service.
2. `take(run_id, service)` for every later request of the run to that service: True while the outage lasts
   (an `outage=N` counts its N requests down, the first one included); False once it is over or if there is
   none.
3. `resumed(run_id)` when a new incarnation of the run starts: every `outage` (without N) of the run ends;
   an `outage=N` runs on until its N requests have failed, across incarnations.
4. `failed(run_id)` says how many requests each outage of the run failed so far (the report's figure).

Lengths a generator draws (`LENGTHS`): longer than the retries of every client killpoint fakes, so the
error reaches the step: the reference client makes 4 attempts, the anthropic and openai SDKs 3
(`max_retries=2`), stripe-python's `StripeClient` 3 (`max_network_retries=2`; the module-level default is no
retry) and the resend SDK one (no retry).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from killpoint.faults.points import outage_length

SDK_ATTEMPTS: dict[str, int] = {"reference": 4, "anthropic": 3, "openai": 3, "stripe": 3, "resend": 1}
"""Attempts per call of the clients killpoint knows, with their default retry settings."""
LENGTHS: tuple[str, ...] = ("outage", f"outage={max(SDK_ATTEMPTS.values()) + 1}")
"""The outages generators draw: until the next incarnation, and one request more than any client's attempts."""


@dataclass
class _Outage:
    left: int | None
    """Requests still to fail (None: until the run's next incarnation)."""
    failed: int = 0
    service: str = ""


@dataclass
class Outages:
    """The outages in force, per (run, service) (see the module docstring)."""

    _live: dict[tuple[str, str], _Outage] = field(default_factory=dict)
    _done: dict[str, list[_Outage]] = field(default_factory=dict)

    def start(self, run_id: str, service: str, action: str) -> None:
        """Flow step 1: the request that met the fault fails; the outage begins with it."""
        self._end(run_id, service)
        outage = _Outage(outage_length(action), service=service)
        self._live[(run_id, service)] = outage
        self._fail(run_id, outage)

    def take(self, run_id: str, service: str) -> bool:
        """Flow step 2: True when this request of `run_id` to `service` fails in an outage."""
        outage = self._live.get((run_id, service))
        if outage is None:
            return False
        self._fail(run_id, outage)
        return True

    def resumed(self, run_id: str) -> None:
        """Flow step 3: a new incarnation of `run_id` started; its `outage`s without N end."""
        for (run, service), outage in list(self._live.items()):
            if run == run_id and outage.left is None:
                self._end(run, service)

    def failed(self, run_id: str) -> dict[str, int]:
        """Flow step 4: requests failed per service by the run's outages, ended or not."""
        out: dict[str, int] = {}
        live = [o for (r, _), o in self._live.items() if r == run_id]
        for o in [*self._done.get(run_id, []), *live]:
            out[o.service] = out.get(o.service, 0) + o.failed
        return out

    def _fail(self, run_id: str, outage: _Outage) -> None:
        outage.failed += 1
        if outage.left is not None:
            outage.left -= 1
            if outage.left <= 0:
                self._end(run_id, outage.service)

    def _end(self, run_id: str, service: str) -> None:
        outage = self._live.pop((run_id, service), None)
        if outage is not None:
            self._done.setdefault(run_id, []).append(outage)
