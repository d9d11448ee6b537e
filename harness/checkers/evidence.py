"""Evidence: everything a checker may look at for one run, gathered after the run ended."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from killpoint.checkers.knobs import EMPTY, Knobs, Replay
from killpoint.events import Event, FaultFired, Hung
from killpoint.fake_services.cassette import SERVICE_OF

MODEL_SERVICES = frozenset(SERVICE_OF.values())
"""The fakes that answer model APIs (their requests are attempts too, never effects)."""

RUN_PLACEHOLDER = "<run>"
MIN_ALIAS = 6
"""Shorter keys and ids are not aliased: replacing them inside other text would do harm."""


@dataclass
class Evidence:
    """The recorded facts of one run (faulted or baseline). Checkers are pure functions of these.

    `events` are the run's control events (harness/events.py) before its evidence was gathered;
    `final` is the final checkpoint payload (None: no checkpoint), `final_raw` its stored text;
    `audit` the checkpoint writes in commit order (seq, cursor, status, app = incarnation id);
    `attempts`/`effects`/`model_requests` the fake services' records; `own_effects` rows of the agent's
    own-database effects; `incarnations` one dict per worker process (inc, role, pid, exit_code,
    signal); `limit` the liveness bound that stopped the run, if any; `leftovers` processes found alive
    after the run. What the run recorded as its options is split (harness/checkers/knobs.py): `knobs` it
    ran with, the `volatile` fields of a crash-free run, the `replay` metadata, and the scenario's `extra`.
    """

    run_id: str
    events: list[Event] = field(default_factory=list)
    final: dict | None = None
    final_raw: str | None = None
    audit: list[dict] = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)
    effects: list[dict] = field(default_factory=list)
    model_requests: list[dict] = field(default_factory=list)
    own_effects: list[Any] = field(default_factory=list)
    incarnations: list[dict] = field(default_factory=list)
    limit: str | None = None
    leftovers: list[str] = field(default_factory=list)
    crashes: dict[str, dict] = field(default_factory=dict)
    """Workers that died of an exception: incarnation id -> {"log": path, "tail": last traceback lines}."""
    notes: list[str] = field(default_factory=list)
    """What the runtime's own records show it did that explains a failure (`Adapter.notes`), one line each."""
    refused: dict[str, str] = field(default_factory=dict)
    """Workers that exited non-zero without a traceback (a worker not in Python, one that logs and exits) whose
    log's end says the database refused them a connection for want of slots: incarnation id -> that line."""
    knobs: Knobs = field(default_factory=Knobs)
    volatile: frozenset[str] = frozenset()
    """Fields left out of comparisons with this (crash-free) run: they differed between two crash-free
    runs, or the step module declared them (`NONDETERMINISTIC`). Paths like `state.decided_at`,
    `effect.mailer.sent_at`, `own.2`, `model.messages.0.content` (a part of every model request)."""
    replay: Replay = field(default_factory=Replay)
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    """What the run's scenario recorded for its checkers and summary (`seeded_raw`, `drain_expect`...)."""

    def faults(self) -> list[FaultFired]:
        return [e for e in self.events if isinstance(e, FaultFired)]

    def hung(self) -> list[Hung]:
        """Its incarnations still running past its time budget (harness/run/hang.py)."""
        return [e for e in self.events if isinstance(e, Hung)]

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Run-specific names and their placeholders (`aliases`, of this run's effects)."""
        return aliases(self.run_id, self.effects)

    def normalize(self, value: Any) -> Any:
        """`value` with run-specific names replaced by placeholders, so two runs compare."""
        return normalize(value, self.aliases)


def aliases(run_id: str, effects: list[dict[str, Any]]) -> dict[str, str]:
    """Run-specific names and their placeholders, longest first: each idempotency key and each
    effect id of `effects` (the run's, as the fake services recorded them), named by service and order of
    first appearance (so an agent's own key scheme, a uuid or a digest, compares across runs), and the run
    id. A key that holds the run id is left to the run id's placeholder (`<run>:charge`): it compares as it
    is, whatever order concurrent requests arrived in, and the id of its effect is named after it
    (`<ledger-effect of <run>:charge>`)."""
    out: dict[str, str] = {}
    keys: dict[str, int] = {}
    counts: dict[str, int] = {}
    for e in effects:
        service = str(e.get("service"))
        key = e.get("key")
        if isinstance(key, str) and len(key) >= MIN_ALIAS and key not in out and run_id not in key:
            keys[service] = keys.get(service, 0) + 1
            out[key] = f"<{service}-key{keys[service]}>"
        counts[service] = counts.get(service, 0) + 1
        if e.get("id") and len(str(e["id"])) >= MIN_ALIAS:
            named = isinstance(key, str) and run_id in key  # named by its key, not by arrival
            out[str(e["id"])] = (f"<{service}-effect of {key.replace(run_id, RUN_PLACEHOLDER)}>" if named
                                 else f"<{service}-effect{counts[service]}>")
    out[run_id] = RUN_PLACEHOLDER
    return dict(sorted(out.items(), key=lambda kv: -len(kv[0])))


def normalize(value: Any, aliases: dict[str, str]) -> Any:
    if isinstance(value, str):
        for old, new in aliases.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {normalize(k, aliases): normalize(v, aliases) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(normalize(v, aliases) for v in value)
    return value


VOLATILE = "<not compared>"


def mask(value: Any, path: str, volatile: frozenset[str]) -> Any:
    """`value` with every field whose dotted path (under `path`) is in `volatile` replaced by VOLATILE."""
    if not volatile:
        return value
    if path in volatile:
        return VOLATILE
    if isinstance(value, dict):
        return {k: mask(v, f"{path}.{k}" if path else str(k), volatile) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v, f"{path}.{i}" if path else str(i), volatile) for i, v in enumerate(value)]
    return value


def not_compared(volatile: frozenset[str], prefix: str) -> str:
    """` (not compared: a, b)` for the volatile fields under `prefix`, or "" when there are none."""
    mine = sorted(v for v in volatile if v.startswith(prefix))
    return f" (not compared, they differ between crash-free runs: {', '.join(mine)})" if mine else ""


def differing(a: Any, b: Any, path: str) -> set[str]:
    """The dotted paths (under `path`) where `a` and `b` differ; lists of different lengths differ whole."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: set[str] = set()
        for k in set(a) | set(b):
            out |= differing(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = set()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out |= differing(x, y, f"{path}.{i}" if path else str(i))
        return out
    return set() if a == b else {path}


def volatile_fields(a: Evidence, b: Evidence) -> set[str]:
    """Fields that differ between two crash-free runs `a` and `b` of one agent (after run-specific names are
    replaced): of the final state, of each service's effects (paired in order), of the own-database rows, of
    the model requests (paired in order, timestamps already left out: `request_body`)."""
    out: set[str] = set()
    if a.final is not None and b.final is not None:
        out |= differing(a.normalize(a.final.get("state")), b.normalize(b.final.get("state")), "state")
    by_service: dict[str, list[tuple[dict, dict]]] = {}
    left = [e for e in a.effects]
    right = [e for e in b.effects]
    for service in {str(e.get("service")) for e in left}:
        xs = [e for e in left if str(e.get("service")) == service]
        ys = [e for e in right if str(e.get("service")) == service]
        by_service[service] = list(zip(xs, ys, strict=False))
    for service, pairs in by_service.items():
        for x, y in pairs:
            out |= differing(a.normalize(x.get("payload")), b.normalize(y.get("payload")), f"effect.{service}")
    for x, y in zip(a.own_effects, b.own_effects, strict=False):
        out |= differing(a.normalize(x), b.normalize(y), "own")
    for x, y in zip(a.model_requests, b.model_requests, strict=False):
        out |= differing(request_body(a, x), request_body(b, y), "model")
    return out


TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?)?"  # ISO 8601
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"  # a time of day
    r"|\b1[6-9]\d{8}(?:\.\d+)?\b")  # seconds since the epoch, 2020-2033
"""Text that reads as the current time: left out of a model request's identity wherever it appears (a
prompt that names the hour is asked again in another second on replay; it is the same request)."""
TIME = "<time>"


def unstamped(value: Any) -> Any:
    """`value` with every timestamp in its strings (`TIMESTAMP`) replaced by `<time>`."""
    if isinstance(value, str):
        return TIMESTAMP.sub(TIME, value)
    if isinstance(value, dict):
        return {k: unstamped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [unstamped(v) for v in value]
    return value


def service_attempts(ev: Evidence) -> list[dict]:
    """The run's requests to services other than the model fakes (`MODEL_SERVICES`), applied or not."""
    return [a for a in ev.attempts if a.get("service") not in MODEL_SERVICES]


def request_body(ev: Evidence, r: dict, volatile: frozenset[str] = frozenset()) -> Any:
    """What names a model request across runs: its model, system, messages and tools, with run-specific names
    replaced (`Evidence.normalize`), timestamps in its text replaced (`unstamped`), and the fields in
    `volatile` under `model.` (`model.messages.0.content`: found to differ between the two crash-free runs,
    or declared in the step module's `NONDETERMINISTIC`) left out."""
    body = {k: r.get(k) for k in ("model", "system", "messages")}
    body["tools"] = r.get("tools") or []
    return mask(unstamped(ev.normalize(body)), "model", volatile)
