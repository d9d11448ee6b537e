"""Checker of what the world saw: exactly_once (effects). context_fidelity (model requests) is in context.py."""

from __future__ import annotations

import json
from collections import Counter

from killpoint.checkers.effect_diff import describe
from killpoint.checkers.evidence import Evidence, mask, not_compared, service_attempts
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed, unknown
from killpoint.checkers.visits import attempt_visits, label

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
    """Applied effects (services and own database) equal the crash-free run's: none missing, none extra; and
    no visit of a step sent its request under a key an earlier visit of that step used (its effect is missing,
    deduplicated away, even when the crash-free run has the same bug). Equal, but a re-sent key's answer proved neither a replay nor a second effect (an `unproven` attempt of
    the recording proxy): unknown, naming what the proxy could not see and the declaration that settles it.
    Neither run made an effect (no service request applied, no row of the agent's own tables): nothing was
    held to once, `n/a`, never a pass."""
    collided = collisions(ev)
    if collided:
        return failed("exactly_once", f"effects never done: {len(collided)} visit(s) of a step sent their "
                      "request under a key an earlier visit of the same step had used, so the service "
                      "applied nothing for them", collided)
    if base is None:
        return unknown("exactly_once", "no crash-free baseline to compare with")
    volatile = base.volatile
    mine, theirs = _effect_keys(ev, volatile), _effect_keys(base, volatile)
    extra, missing = mine - theirs, theirs - mine
    if not mine and not theirs and not service_attempts(ev):
        return not_applicable("exactly_once", "not exercised: neither this run nor the crash-free one made an "
                              "effect (no service request, no row of the agent's own tables)")
    unproven = [a for a in ev.attempts if a.get("outcome") == "unproven"]
    if not extra and not missing and unproven:  # the recording proxy could not tell replayed from applied
        return unknown("exactly_once", f"{len(unproven)} re-sent request(s) neither shown replayed nor shown "
                       f"applied again: {unproven[0].get('why') or 'the service said neither'}")
    if not extra and not missing:
        retried = sum(1 for a in ev.attempts if a.get("outcome") == "deduplicated")
        return passed("exactly_once", f"{sum(mine.values())} effects, as in the crash-free run"
                      + (f" ({retried} retries deduplicated)" if retried else "") + not_compared(volatile, "effect"))
    reason, lines = describe(ev, base, mine, theirs)
    return Verdict("exactly_once", "fail", reason, tuple(lines[:MAX_LINES]) + (
        (f"... and {len(lines) - MAX_LINES} more line(s) in the run's verdicts.json",) if len(lines) > MAX_LINES else ()))


def collisions(ev: Evidence) -> list[str]:
    """One `missing x1` line per visit of a step whose effect was never applied because its key collided
    with another visit's: a visit (`checkers.visits`) whose request a service deduplicated against the
    effect an earlier visit of the same step applied, while the visit itself applied nothing at all. A loop that keys each pass the same way (the step's key for every installment) gets its first
    pass done and the others silently replayed; in a crash-free run too, so no comparison with it shows it.
    A re-read from another step (the email step re-sending the charge to read its receipt), or from a visit
    that also did an effect of its own, is no collision. Assumed: a visit of a loop that sends a request and
    applies nothing meant that request as its effect (a pass that only polls an earlier pass's effect by
    re-sending it would be failed here: poll through a read endpoint instead).
    """
    visits = attempt_visits(ev)
    if visits is None:
        return []
    by_order = {a.get("order"): v for a, v in zip(ev.attempts, visits, strict=True)}
    owner = {(str(e.get("service")), e.get("key")): by_order.get(e.get("attempt")) for e in ev.effects
             if e.get("key") is not None}
    applying = {e.get("attempt") for e in ev.effects}
    applied = {v for a, v in zip(ev.attempts, visits, strict=True) if a.get("order") in applying}
    lines: list[str] = []
    seen: set = set()
    for a, visit in zip(ev.attempts, visits, strict=True):
        service = str(a.get("service"))
        first = owner.get((service, a.get("key")))
        if (a.get("outcome") != "deduplicated" or first is None or first[0] != visit[0] or first == visit
                or visit in applied or (service, visit) in seen):
            continue
        seen.add((service, visit))
        lines.append(f"missing x1: {service} {a.get('endpoint') or ''} key={a.get('key')}".replace("  ", " ")
                     + f" -- {label(visit, True)} sent it again under the key of {label(first, True)}, "
                     "which the service had applied: this visit's effect was never done (a per-visit key "
                     "such as <run>:<step>:<n> keeps them apart)")
    return lines
