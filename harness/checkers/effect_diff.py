"""The evidence of an exactly_once failure, written for a person: what was done twice, what changed and why.

Input: the effects of a run and of the crash-free run, compared as (service, endpoint, key, payload) with
run-specific names replaced by placeholders (`<ledger-effect2>`, `<mailer-key1>`; `Evidence.normalize`). An
effect's place is its (service, endpoint): `stripe POST /v1/refunds`; a history that recorded no endpoint
has one place per service. Effects are compared with effects of the same place only.

1. Duplicates first, one line per effect: an effect the crash-free run also applied, applied more times
   here (`extra x1: ledger POST /v1/charges key=... {payload} -- a duplicate: applied x2, crash-free x1`),
   with the whole key and payload of this run (placeholders turned back into this run's real names).
2. Then changed effects: an extra and a missing effect of the same place and key are one effect whose
   payload differs, shown as a diff of the fields that differ (`- field: crash-free value` /
   `+ field: this run's value`), each value with its real name and the placeholder it stands for. Keys
   that are placeholders are numbered by order of appearance, so one extra effect shifts the numbers of
   those after it: an extra and a missing effect of the same place, both keyed by placeholders, left
   after that are paired too, in order.
3. A changed effect whose differing values all name an effect or key of another place already reported
   (a duplicate, an extra or another change) is a knock-on: it is folded under the first such finding
   (`knock-on: ...`) instead of being listed as a finding of its own.
4. What is left is listed whole: `extra xN` (done here, never in the crash-free run; marked a duplicate when
   the crash-free run applied the same payload at the same place under another key, e.g. a retry that
   dropped its key) and `missing xN`.
5. The reason names each kind of finding in a clause of its own, joined by `; ` (`effects done twice;
   effects of the crash-free run never done`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from killpoint.checkers.evidence import Evidence, differing

Key = tuple[Any, Any, Any, str]
"""(service, endpoint, key, payload), normalized (`effects._effect_keys`)."""
Place = tuple[str, Any]
"""(service, endpoint): where an effect is done."""
_NONE = object()
PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.-]+?)-(?:key|effect)\d+>")
KEY_PLACEHOLDER = re.compile(r"<[A-Za-z0-9_.-]+?-key\d+>")


def _real(text: str, ev: Evidence) -> str:
    """`text` with this run's placeholders turned back into its real names."""
    back = {v: k for k, v in ev.aliases.items()}
    return re.sub(r"<[^<>\s]+>", lambda m: back.get(m.group(0), m.group(0)), text)


def _value(value: Any, ev: Evidence) -> str:
    shown = json.dumps(value, sort_keys=True)
    real = _real(shown, ev)
    return real if real == shown else f"{real} ({shown.strip(chr(34))})"


def _at(value: Any, path: str) -> Any:
    for part in [p for p in path.split(".") if p]:
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _places(*runs: Evidence) -> dict[str, set[Place]]:
    """Each placeholder of an effect's id or key in `runs`, and the places of the effects it stands for."""
    out: dict[str, set[Place]] = {}
    for ev in runs:
        for e in ev.effects:
            place = (str(e.get("service")), ev.normalize(e.get("endpoint")))
            for name in (e.get("id"), e.get("key")):
                alias = ev.aliases.get(str(name)) if name is not None else None
                if alias is not None:
                    out.setdefault(alias, set()).add(place)
    return out


def _named(value: Any, places: dict[str, set[Place]]) -> set[Place]:
    """The places of the effects and keys `value` names by placeholder (a name of no known effect: its
    service's place in a history without endpoints)."""
    text = json.dumps(value)
    out: set[Place] = set()
    for m in PLACEHOLDER.finditer(text):
        out |= places.get(m.group(0), {(m.group(1), None)})
    return out


def _where(svc: Any, endpoint: Any, ev: Evidence) -> str:
    """`SERVICE` or `SERVICE METHOD PATH`, with this run's real names."""
    return f"{svc} {_real(str(endpoint), ev)}" if endpoint is not None else str(svc)


def _effect(k: Key, ev: Evidence) -> str:
    """`SERVICE [ENDPOINT] key=KEY PAYLOAD`, whole, with this run's real names (`key=None`: no key)."""
    svc, endpoint, key, payload = k
    return f"{_where(svc, endpoint, ev)} key={_real(str(key), ev)} {_real(payload, ev)}"


def _pair(extra: Counter, missing: Counter) -> list[tuple[Key, Key]]:
    """Flow step 2: (extra, missing) pairs that are one effect changed, taken out of both counters."""
    changed: list[tuple[Key, Key]] = []

    def take(k: Key, twin: Key) -> None:
        changed.append((k, twin))
        extra[k] -= 1
        missing[twin] -= 1

    for k in list(extra):
        twin = next((m for m in missing if m[:3] == k[:3] and missing[m]), None)
        if twin is not None and k[2] is not None:
            take(k, twin)
    for k in list(extra):  # keys renumbered by an effect before them: the same place, in order
        while extra[k] and k[1] is not None and KEY_PLACEHOLDER.fullmatch(str(k[2])):
            twin = next((m for m in missing if m[:2] == k[:2] and missing[m]
                         and KEY_PLACEHOLDER.fullmatch(str(m[2]))), None)
            if twin is None:
                break
            take(k, twin)
    return changed


def describe(ev: Evidence, base: Evidence, mine: Counter, theirs: Counter) -> tuple[str, list[str]]:
    """The reason and the evidence lines of an exactly_once failure (flow above)."""
    extra, missing = mine - theirs, theirs - mine
    findings: list[tuple[set[Place], list[str]]] = []  # (places it touches, its lines)
    for k in extra:  # flow step 1
        if theirs[k]:
            n = mine[k] - theirs[k]
            findings.append(({(str(k[0]), k[1])}, [f"extra x{n}: {_effect(k, ev)} -- a duplicate: applied "
                                                   f"x{mine[k]}, crash-free x{theirs[k]}"]))
    extra = Counter({k: n for k, n in extra.items() if not theirs[k]})
    changed = _pair(extra, missing)
    places = _places(ev, base)
    knock_ons: list[tuple[Place, set[Place], list[str]]] = []
    for k, twin in changed:
        now, was = json.loads(k[3]), json.loads(twin[3])
        paths = sorted(differing(was, now, ""))
        diff = []
        for path in paths:
            diff.append(f"    - {path or '(payload)'}: {_value(_at(was, path), base)}")
            diff.append(f"    + {path or '(payload)'}: {_value(_at(now, path), ev)}")
        named = set().union(*(_named(_at(now, p), places) | _named(_at(was, p), places) for p in paths)) \
            if paths else set()
        line = f"payload differs: {_where(k[0], k[1], ev)} key={_real(str(k[2]), ev)} ({len(paths)} field(s)):"
        own = (str(k[0]), k[1])
        knock_ons.append((own, named - {own}, [line, *diff]))
    for k, n in (+extra).items():  # flow step 4 (extras are causes too)
        svc, endpoint, key, payload = k
        twin_key = next((t[2] for t in theirs if t[:2] == (svc, endpoint) and t[3] == payload and t[2] != key),
                        _NONE)
        again = (f" -- a duplicate: the same payload as key={_real(str(twin_key), ev)}, sent again under "
                 f"{'no key' if key is None else 'another key'}") if twin_key is not _NONE else ""
        findings.append(({(str(svc), endpoint)}, [f"extra x{n}: " + _effect(k, ev) + again]))
    for own, named, lines in knock_ons:  # flow step 3
        cause = next((f for f in findings if named & f[0]), None)
        if cause is not None:
            cause[1].extend(["  knock-on: " + lines[0], *("  " + x for x in lines[1:])])
        else:
            findings.append(({own}, lines))
    for k, n in (+missing).items():
        findings.append(({(str(k[0]), k[1])}, [f"missing x{n}: " + _effect(k, base)]))
    firsts = [f[1][0] for f in findings]
    what = [w for w, c in (("effects done twice", any("-- a duplicate" in x for x in firsts)),
                           ("effects done that the crash-free run never did",
                            any(x.startswith("extra") and "-- a duplicate" not in x for x in firsts)),
                           ("effects done with a different payload", any(x.startswith("payload") for x in firsts)),
                           ("effects of the crash-free run never done", any(x.startswith("missing") for x in firsts)))
            if c]
    return "; ".join(what) or "effects differ", [line for f in findings for line in f[1]]  # a clause per kind
