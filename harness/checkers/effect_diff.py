"""The evidence of an exactly_once failure, written for a person: what was done twice, what changed and why.

Input: the effects of a run and of the crash-free run, compared as (service, key, payload) with run-specific
names replaced by placeholders (`<ledger-effect2>`, `<mailer-key1>`; `Evidence.normalize`).

1. Duplicates first, one line per effect: an effect the crash-free run also applied, applied more times
   here (`extra x1: ledger key=... {payload} -- a duplicate: applied x2, crash-free x1`), with the whole
   key and payload of this run (placeholders turned back into this run's real names).
2. Then changed effects: an extra and a missing effect of the same service and key are one effect whose
   payload differs, shown as a diff of the fields that differ (`- field: crash-free value` /
   `+ field: this run's value`), each value with its real name and the placeholder it stands for.
3. A changed effect whose differing values all name an effect or key of a service already reported
   (a duplicate, an extra or another change) is a knock-on: it is folded under the first such finding
   (`knock-on: ...`) instead of being listed as a finding of its own.
4. What is left is listed whole: `extra xN` (done here, never in the crash-free run; marked a duplicate when
   the crash-free run applied the same payload under another key, e.g. a retry that dropped its key) and
   `missing xN`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from killpoint.checkers.evidence import Evidence, differing

Key = tuple[Any, Any, str]
_NONE = object()
PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.-]+?)-(?:key|effect)\d+>")


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


def _services(value: Any) -> set[str]:
    return set(PLACEHOLDER.findall(json.dumps(value)))


def _effect(svc: Any, key: Any, payload: str, ev: Evidence) -> str:
    """`SERVICE key=KEY PAYLOAD`, whole, with this run's real names (`key=None`: the effect had no key)."""
    return f"{svc} key={_real(str(key), ev)} {_real(payload, ev)}"


def describe(ev: Evidence, base: Evidence, mine: Counter, theirs: Counter) -> tuple[str, list[str]]:
    """The reason and the evidence lines of an exactly_once failure (flow above)."""
    extra, missing = mine - theirs, theirs - mine
    findings: list[tuple[set[str], list[str]]] = []  # (services it touches, its lines)
    for svc, key, payload in extra:  # flow step 1
        if theirs[(svc, key, payload)]:
            n = mine[(svc, key, payload)] - theirs[(svc, key, payload)]
            findings.append(({str(svc)}, [f"extra x{n}: {_effect(svc, key, payload, ev)} -- a duplicate: applied "
                                          f"x{mine[(svc, key, payload)]}, crash-free x{theirs[(svc, key, payload)]}"]))
    extra = Counter({k: n for k, n in extra.items() if not theirs[k]})
    changed: list[tuple[Key, Key]] = []
    for k in list(extra):  # flow step 2
        twin = next((m for m in missing if m[:2] == k[:2] and missing[m]), None)
        if twin is not None and k[1] is not None:
            changed.append((k, twin))
            extra[k] -= 1
            missing[twin] -= 1
    knock_ons: list[tuple[str, set[str], list[str]]] = []
    for k, twin in changed:
        now, was = json.loads(k[2]), json.loads(twin[2])
        paths = sorted(differing(was, now, ""))
        diff = []
        for path in paths:
            diff.append(f"    - {path or '(payload)'}: {_value(_at(was, path), base)}")
            diff.append(f"    + {path or '(payload)'}: {_value(_at(now, path), ev)}")
        named = set().union(*(_services(_at(now, p)) | _services(_at(was, p)) for p in paths)) if paths else set()
        line = f"payload differs: {k[0]} key={_real(str(k[1]), ev)} ({len(paths)} field(s)):"
        knock_ons.append((str(k[0]), named - {str(k[0])}, [line, *diff]))
    for (svc, key, payload), n in (+extra).items():  # flow step 4 (extras are causes too)
        twin_key = next((k[1] for k in theirs if k[0] == svc and k[2] == payload and k[1] != key), _NONE)
        again = (f" -- a duplicate: the same payload as key={_real(str(twin_key), ev)}, sent again under "
                 f"{'no key' if key is None else 'another key'}") if twin_key is not _NONE else ""
        findings.append(({str(svc)}, [f"extra x{n}: " + _effect(svc, key, payload, ev) + again]))
    for svc, named, lines in knock_ons:  # flow step 3
        cause = next((f for f in findings if named & f[0]), None)
        if cause is not None:
            cause[1].extend(["  knock-on: " + lines[0], *("  " + x for x in lines[1:])])
        else:
            findings.append(({str(svc)}, lines))
    for (svc, key, payload), n in (+missing).items():
        findings.append(({str(svc)}, [f"missing x{n}: " + _effect(svc, key, payload, base)]))
    what = [w for w, c in (("done twice", any("-- a duplicate" in f[1][0] for f in findings)),
                           ("done but never in the crash-free run", any(f[1][0].startswith("extra") and "-- a duplicate" not in f[1][0]
                                                      for f in findings)),
                           ("with a different payload", any(f[1][0].startswith("payload") for f in findings)),
                           ("never done", any(f[1][0].startswith("missing") for f in findings))) if c]
    return f"effects {' and '.join(what) or 'differ'}", [line for f in findings for line in f[1]]
