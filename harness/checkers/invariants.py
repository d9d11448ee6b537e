"""Invariants across runs, and concurrent runs against the same runs done one after another. Pure.

Anchor: Jepsen's workload checkers (the bank test: the total is conserved whatever the interleaving) and
Elle's comparison of a history with a serial one. A step module may declare quantities of its own tables
that a set of runs must move by exactly what the witnesses record of those runs::

    INVARIANTS = {
        "balances follow the charges": {"sql": "SELECT COALESCE(SUM(balance_cents), 0) FROM balances",
                                        "equals": "ledger.amount_cents"},
        "one invoice number per charge": {"sql": "SELECT COUNT(DISTINCT number) FROM invoice_numbers",
                                          "equals": "ledger"},
    }

``sql`` returns one number (the whole table, not one run's rows); ``equals`` is ``SERVICE.FIELD`` (the sum
of that payload field over the set's applied effects of that service) or ``SERVICE`` (how many there are).
The harness measures each ``sql`` before a set of runs starts and after it ends, with nothing else running
(a fleet, the concurrent runs of ``concurrent-runs``), and records the facts in every run's evidence:

- ``invariants_hold``: after - before equals the witnesses' amount, for each invariant (n/a: none declared);
- ``same_as_serial``: the same runs, done concurrently and then one after another from the same start,
  moved each quantity, and left their own effects (``OWN_EFFECTS_SQL``), alike (n/a: no serial run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed

FACTS = "invariants"
SERIAL = "serial"


@dataclass(frozen=True)
class Invariant:
    """One declared invariant: its name, the query of its quantity, and what it must move by."""

    name: str
    sql: str
    equals: str

    @property
    def service(self) -> str:
        return self.equals.partition(".")[0]

    @property
    def field(self) -> str | None:
        return self.equals.partition(".")[2] or None


def declared(raw: Any, module: str) -> tuple[Invariant, ...]:
    """The module's ``INVARIANTS`` read and checked; ``ValueError`` naming the module and the fix."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ValueError(f"{module}.INVARIANTS must be a dict of name -> {{'sql': ..., 'equals': ...}}")
    out = []
    for name, spec in raw.items():
        if not (isinstance(spec, Mapping) and isinstance(spec.get("sql"), str) and isinstance(spec.get("equals"), str)
                and spec["equals"].strip()):
            raise ValueError(f"{module}.INVARIANTS[{name!r}] needs 'sql' (a query of one number) and 'equals' "
                             "('SERVICE.FIELD' or 'SERVICE')")
        out.append(Invariant(str(name), spec["sql"], spec["equals"].strip()))
    return tuple(out)


def witnessed(inv: Invariant, effects: Iterable[Mapping[str, Any]]) -> int:
    """What the witnesses say the set's runs did: the sum of ``inv.field`` (or the count) of its service's effects."""
    mine = [e for e in effects if e.get("service") == inv.service]
    if inv.field is None:
        return len(mine)
    total = 0
    for e in mine:
        value = (e.get("payload") or {}).get(inv.field)
        total += int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
    return total


def facts(invariants: Iterable[Invariant], before: Mapping[str, Any], after: Mapping[str, Any],
          effects: list[Mapping[str, Any]], runs: list[str]) -> list[dict[str, Any]]:
    """What a run's evidence records of a set of runs (JSON): each invariant's before, after and expected move."""
    return [{"name": i.name, "sql": i.sql, "equals": i.equals, "before": before.get(i.name),
             "after": after.get(i.name), "expected": witnessed(i, effects), "runs": len(runs)} for i in invariants]


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def invariants_hold(ev: Evidence, base: Evidence | None = None) -> Verdict:
    """See the module docstring."""
    recorded = ev.extra.get(FACTS)
    if not recorded:
        return not_applicable("invariants_hold", "the agent declares no INVARIANTS, or no set of runs was measured")
    lines = []
    for f in recorded:
        before, after = _num(f.get("before")), _num(f.get("after"))
        if before is None or after is None:
            lines.append(f"{f['name']}: not measured ({f['sql']} gave {f.get('before')!r} then {f.get('after')!r})")
            continue
        if after - before != f["expected"]:
            lines.append(f"{f['name']}: {f['sql']} moved by {after - before:g} over {f['runs']} runs "
                         f"({before:g} -> {after:g}); the witnesses' {f['equals']} of those runs is {f['expected']}")
    if lines:
        return failed("invariants_hold", "an invariant the agent declares does not hold after a set of runs", lines)
    return passed("invariants_hold", f"{len(recorded)} invariant(s) held over {recorded[0]['runs']} runs")


def same_as_serial(ev: Evidence, base: Evidence | None = None) -> Verdict:
    """See the module docstring."""
    serial = ev.extra.get(SERIAL)
    if not serial:
        return not_applicable("same_as_serial", "these runs were not done again one after another")
    lines = [f"{name}: concurrent {moved['concurrent']!r}, serial {moved['serial']!r}"
             for name, moved in sorted(serial.items()) if moved["concurrent"] != moved["serial"]]
    if lines:
        return failed("same_as_serial", "the runs done concurrently left their own tables otherwise than the same "
                                        "runs done one after another (a lost update, or state shared across runs)",
                      lines)
    return passed("same_as_serial", f"{len(serial)} quantity(ies) alike concurrently and serially")
