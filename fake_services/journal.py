"""The witness's record: every attempt, every applied effect, every model request.

Contract:

- One global arrival counter (``order``) is shared by attempts and effects, so records of all services
  interleave in the order they happened. ``reset()`` (no run) sets it back to 0.
- An *attempt* is one request to a service: ``order``, ``service`` (mailer | ledger | webhook | model |
  stripe | resend | openai; reads such as Stripe's retrieve are not attempts),
  ``run_id``, ``key`` (the Idempotency-Key header or None), ``payload_digest``, ``outcome``, ``status``
  (HTTP status sent, None for a drop), ``path``, ``endpoint`` (``METHOD path``, e.g. ``POST /v1/refunds``;
  only when the service named its method), ``t`` (``time.monotonic()`` at arrival). ``outcome`` is
  ``pending`` while the request is in flight (e.g. held by the hook), then one of applied |
  deduplicated | rejected | injected-error | dropped, or ``internal-error`` (the hook raised, or a bug
  of the fake), or ``upstream-error`` (the recording proxy could not reach the service behind it), or
  ``unproven`` (the recording proxy cannot tell whether the service applied a re-sent key again: the
  attempt's ``why`` says what it could not see and the declaration that settles it).
  ``client_gone: True`` is added when the response could not be written.
- An *effect* is listed apart, once per applied effect: ``order``, ``service``, ``run_id``, ``key``,
  ``payload_digest``, ``payload``, ``id``, ``response``, ``attempt`` (order of the attempt that applied
  it), ``t``, and its attempt's ``endpoint`` when it has one: with the service, the effect's identity (a
  confirm or a capture names its object only in the path). "Retried but deduplicated" is two attempts and
  one effect; "done twice" is two effects.
- Idempotency keys are scoped per (service, provider account), as real APIs scope them per API account.
  A run is its own account unless :meth:`Journal.share_account` put it in a named one: then a key one run
  of the account used is replayed to another run of it (``deduplicated``, the attempt recorded in the run
  that sent it, the effect in the run that applied it) or, with other parameters, refused (``conflict``).
  Records stay per run: a run's attempts, effects and model requests are its own whatever its account.
- Readers (``attempts``, ``effects``, ``model_requests``) get deep copies. A reader of one run reads
  that run's records only (kept per run as they come): its cost does not grow with the session's length.
  Writers hand over ownership: ``apply`` and ``add_model_request`` keep the objects they are given
  (freshly parsed bodies), and the record ``apply`` returns is the journal's own, for reading only -- no
  copies on the request path.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

OUTCOMES: tuple[str, ...] = (
    "pending", "applied", "deduplicated", "rejected", "injected-error", "dropped", "internal-error",
    "upstream-error", "unproven",
)

Record = dict[str, Any]


KINDS = ("attempts", "effects", "model")
"""The kinds of record, each kept in arrival order for the session and per run."""


class Journal:
    """Thread-safe, append-only (until ``reset``) record of attempts, effects and model requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._order = 0
        self._attempts: list[Record] = []
        self._effects: list[Record] = []
        self._model: list[Record] = []
        self._runs: dict[str, dict[str, list[Record]]] = {}  # run id -> kind -> its records, in order
        self._by_key: dict[tuple[str, str, str], Record] = {}
        self._by_id: dict[tuple[str, str, str], Record] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._accounts: dict[str, str] = {}  # run id -> the provider account it bills in (default: its own)
        self._indexed: dict[str, list[tuple[dict, tuple]]] = {}  # run id -> the index entries it made
        self._dropped: set[int] = set()  # id() of records of forgotten runs still in the session lists

    def share_account(self, account: str, run_ids: list[str]) -> None:
        """Put ``run_ids`` in the provider account ``account``: from now on they share one idempotency key
        space per service (a key is replayed or refused across them, as a real API account does)."""
        with self._lock:
            for run_id in run_ids:
                self._accounts[run_id] = f"account:{account}"

    def _tick(self) -> int:
        self._order += 1
        return self._order

    def _session(self, kind: str) -> list[Record]:
        """The session's records of `kind` (under the lock: `reset` replaces the lists)."""
        return {"attempts": self._attempts, "effects": self._effects, "model": self._model}[kind]

    def _keep(self, kind: str, record: Record) -> None:
        """Append `record` to the session's list of `kind` and to its run's (under the lock)."""
        self._session(kind).append(record)
        run = self._runs.setdefault(str(record.get("run_id")), {k: [] for k in KINDS})
        run[kind].append(record)

    def _index(self, run_id: str, index: dict, key: tuple, value: Any) -> None:
        """`index[key] = value`, remembered as `run_id`'s (so forgetting the run costs its own size)."""
        index[key] = value
        self._indexed.setdefault(run_id, []).append((index, key))

    def _read(self, kind: str, run_id: str | None) -> list[Record]:
        """Copies of the records of `kind`: the run's, or (None) the session's."""
        with self._lock:
            if run_id is not None:
                return [copy.deepcopy(r) for r in self._runs.get(run_id, {}).get(kind, [])]
            dropped = self._dropped
            return [copy.deepcopy(r) for r in self._session(kind) if id(r) not in dropped]

    def begin(self, service: str, run_id: str, key: str | None, payload_digest: str, path: str,
              method: str | None = None) -> Record:
        """Record an arriving attempt (outcome ``pending``) and return it, for :meth:`finish`; with
        ``method``, its ``endpoint`` is ``METHOD path``."""
        with self._lock:
            attempt: Record = {
                "order": self._tick(), "service": service, "run_id": run_id, "key": key,
                "payload_digest": payload_digest, "outcome": "pending", "status": None, "path": path,
                "t": time.monotonic(),
            }
            if method is not None:
                attempt["endpoint"] = f"{method} {path}"
            self._keep("attempts", attempt)
            return attempt

    def finish(self, attempt: Record, outcome: str, status: int | None, **extra: Any) -> None:
        """Set an attempt's final outcome and status (and any extra fields)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        with self._lock:
            attempt.update(extra, outcome=outcome, status=status)

    def mark(self, attempt: Record, **fields: Any) -> None:
        with self._lock:
            attempt.update(fields)

    def apply(
        self,
        attempt: Record,
        payload: Any,
        dedupe: bool,
        respond: Callable[[str], tuple[str, dict[str, Any]]],
    ) -> tuple[str, Record]:
        """Apply the attempt's effect atomically, unless its key was seen.

        Returns ``("applied", effect)``, ``("deduplicated", original)`` (same key, same payload) or
        ``("conflict", original)`` (same key, other payload); the record is the journal's: read it only.
        The journal keeps ``payload`` as given. ``respond(seed)`` builds ``(id, response)``
        from a deterministic seed: the key, or ``#N`` (the N-th effect of this service in this run) when
        there is no key or ``dedupe`` is off.
        """
        service, run_id, key = attempt["service"], attempt["run_id"], attempt["key"]
        with self._lock:
            space = self._accounts.get(run_id, f"run:{run_id}")
            if dedupe and key is not None:
                original = self._by_key.get((service, space, key))
                if original is not None:
                    same = original["payload_digest"] == attempt["payload_digest"]
                    return ("deduplicated" if same else "conflict"), original
            count = self._counts.get((service, run_id), 0) + 1
            self._index(run_id, self._counts, (service, run_id), count)
            effect_id, response = respond(key if dedupe and key is not None else f"#{count}")
            effect: Record = {
                "order": self._tick(), "service": service, "run_id": run_id, "key": key,
                "payload_digest": attempt["payload_digest"], "payload": payload,
                "id": effect_id, "response": response, "attempt": attempt["order"], "t": time.monotonic(),
            }
            if "endpoint" in attempt:
                effect["endpoint"] = attempt["endpoint"]
            self._keep("effects", effect)
            self._index(run_id, self._by_id, (service, run_id, effect_id), effect)
            if dedupe and key is not None:
                self._index(run_id, self._by_key, (service, space, key), effect)
            return "applied", effect

    def find_effect(self, service: str, run_id: str, effect_id: str) -> Record | None:
        """A copy of the effect of ``service`` in ``run_id`` with id ``effect_id``, or None."""
        with self._lock:
            effect = self._by_id.get((service, run_id, effect_id))
            return copy.deepcopy(effect) if effect is not None else None

    def effects_of(self, service: str, run_id: str) -> list[Record]:
        """Copies of the effects of one service in one run, in order."""
        with self._lock:
            mine = self._runs.get(run_id, {}).get("effects", [])
            return [copy.deepcopy(r) for r in mine if r["service"] == service]

    def add_model_request(self, record: Record) -> None:
        """Record one model request (its ``order`` is that of its attempt); the journal keeps ``record``."""
        with self._lock:
            self._keep("model", record)

    def attempts(self, run_id: str | None = None) -> list[Record]:
        return self._read("attempts", run_id)

    def effects(self, run_id: str | None = None) -> list[Record]:
        return self._read("effects", run_id)

    def model_requests(self, run_id: str | None = None) -> list[Record]:
        return self._read("model", run_id)

    def reset(self, run_id: str | None = None) -> None:
        """Forget one run's records (and its idempotency keys), or everything and the counter. Forgetting a
        run costs its own records, not the session's: a harness forgets each run once it is judged, so a
        long exploration's memory stays flat (the session lists drop them in batches, `_compact`)."""
        with self._lock:
            if run_id is None:
                self._order = 0
                self._attempts.clear()
                self._effects.clear()
                self._model.clear()
                self._runs.clear()
                self._by_key.clear()
                self._by_id.clear()
                self._counts.clear()
                self._accounts.clear()
                self._indexed.clear()
                self._dropped.clear()
                return
            for records in self._runs.pop(run_id, {}).values():
                self._dropped.update(id(r) for r in records)
            for index, key in self._indexed.pop(run_id, []):
                value = index.get(key)
                if value is not None and (not isinstance(value, dict) or value.get("run_id") == run_id):
                    del index[key]
            self._accounts.pop(run_id, None)
            self._compact()

    def forget(self, run_id: str) -> bool:
        """``reset(run_id)`` unless the run bills in a shared account (another run of the account may still
        replay its keys): whether it was forgotten."""
        with self._lock:
            if run_id in self._accounts:
                return False
        self.reset(run_id)
        return True

    def _compact(self) -> None:
        """Drop forgotten runs' records from the session lists once they are half of them (amortised:
        each record is passed over a bounded number of times)."""
        held = len(self._attempts) + len(self._effects) + len(self._model)
        if not self._dropped or 2 * len(self._dropped) < held:
            return
        dropped = self._dropped
        self._attempts = [r for r in self._attempts if id(r) not in dropped]
        self._effects = [r for r in self._effects if id(r) not in dropped]
        self._model = [r for r in self._model if id(r) not in dropped]
        self._dropped = set()
