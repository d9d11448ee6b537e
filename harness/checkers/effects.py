"""Checker of what the world saw: exactly_once (effects). context_fidelity (model requests) is in context.py."""

from __future__ import annotations

import json
from collections import Counter

from killpoint.checkers.effect_diff import describe
from killpoint.checkers.evidence import Evidence, mask, not_compared
from killpoint.checkers.verdict import Verdict, passed, unknown

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
