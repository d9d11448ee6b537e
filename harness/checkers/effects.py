"""Checkers of what the world saw: exactly_once (effects) and context_fidelity (model requests)."""

from __future__ import annotations

import json
from collections import Counter

from killpoint.checkers.effect_diff import describe
from killpoint.checkers.evidence import Evidence, mask, not_compared
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed, unknown

MAX_LINES = 24
"""Evidence lines an exactly_once failure shows (duplicates first, knock-ons folded under their cause)."""


def _effect_keys(ev: Evidence, volatile: frozenset[str] = frozenset()) -> Counter:
    """Each effect as (service, endpoint, key, payload): its identity is its service and endpoint (`POST
    /v1/refunds`, with run-specific ids in the path replaced by placeholders; None in a history that did
    not record it: one endpoint per service), then its key; the payload fields in `volatile`
    (`effect.SERVICE.FIELD`, found to differ between two crash-free runs) are left out."""
    keys: Counter = Counter()
    for e in ev.effects:
        service = e.get("service")
        payload = mask(ev.normalize(e.get("payload")), f"effect.{service}", volatile)
        keys[(service, ev.normalize(e.get("endpoint")), ev.normalize(e.get("key")),
              json.dumps(payload, sort_keys=True))] += 1
    for row in ev.own_effects:
        keys[("own-db", None, None,
              json.dumps(mask(ev.normalize(row), "own", volatile), sort_keys=True, default=str))] += 1
    return keys


def exactly_once(ev: Evidence, base: Evidence | None) -> Verdict:
    """Applied effects (services and own database) equal the crash-free run's: none missing, none extra."""
    if base is None:
        return unknown("exactly_once", "no crash-free baseline to compare with")
    volatile = base.volatile
    mine, theirs = _effect_keys(ev, volatile), _effect_keys(base, volatile)
    extra, missing = mine - theirs, theirs - mine
    if not extra and not missing:
        retried = sum(1 for a in ev.attempts if a.get("outcome") == "deduplicated")
        return passed("exactly_once", f"{sum(mine.values())} effects, as in the crash-free run"
                      + (f" ({retried} retries deduplicated)" if retried else "") + not_compared(volatile, "effect"))
    reason, lines = describe(ev, base, mine, theirs)
    return Verdict("exactly_once", "fail", reason, tuple(lines[:MAX_LINES]) + (
        (f"... and {len(lines) - MAX_LINES} more line(s) in the run's verdicts.json",) if len(lines) > MAX_LINES else ()))


def _request_body(ev: Evidence, r: dict) -> str:
    return json.dumps(ev.normalize({k: r.get(k) for k in ("model", "system", "messages")}), sort_keys=True)


def context_fidelity(ev: Evidence, base: Evidence | None) -> Verdict:
    """Every model request equals one the crash-free run sent: a resumed step sees the context it saw."""
    if base is None:
        return unknown("context_fidelity", "no crash-free baseline to compare with")
    if not base.model_requests and not ev.model_requests:
        return not_applicable("context_fidelity", "the agent makes no model requests")
    known = {_request_body(base, r) for r in base.model_requests}  # none: any request is one never sent
    strange = [r for r in ev.model_requests if _request_body(ev, r) not in known]
    if not strange:
        return passed("context_fidelity", f"{len(ev.model_requests)} model requests, all as in the crash-free run")
    lines = []
    for r in strange[:3]:
        msgs = ev.normalize(r.get("messages") or [])
        lines.append(f"request #{r.get('order')} with {len(msgs)} messages, last: {json.dumps(msgs[-1:])[:100]}")
    nearest = sorted(len(json.loads(b)["messages"] or []) for b in known)
    lines.append(f"crash-free requests had {nearest} messages")
    return failed("context_fidelity", f"{len(strange)} model request(s) the crash-free run never sent", lines)
