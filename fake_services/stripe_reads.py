"""The fake Stripe's reads: retrieve, list, search, and ``expand``, over a run's objects (``stripe_store.Store``).

Pure: each function takes the objects and the request's parameters and returns the answer's JSON, or
raises :class:`Refused` with Stripe's message. A read is not an attempt: the journal does not record it.

- **list** (``GET /v1/<objects>``): newest first; ``limit`` (1 to 100, default 10), ``starting_after`` /
  ``ending_before`` (an id in the list), and the filters of ``FILTERS`` (``customer``, ``payment_intent``,
  ``charge``, ``email``) compared as strings. Answer ``{"object": "list", "data", "has_more", "url"}``, which
  the SDK pages through (``auto_paging_iter``).
- **search** (``GET /v1/<objects>/search?query=...``): Stripe's query language for the fields of
  ``SEARCH_FIELDS``: clauses ``field:"value"`` (exact, case-insensitive), ``field~"value"`` (substring),
  ``field>n``, ``<``, ``>=``, ``<=`` (numbers), ``metadata["key"]:"value"``, a leading ``-`` negates; clauses
  joined by ``AND`` or by ``OR`` (not both). ``page`` is the ``next_page`` of the previous answer. Answer
  ``{"object": "search_result", "data", "has_more", "next_page", "url"}``.
- **expand**: ``expand[]=latest_charge`` (or ``customer``, ``charge``, ``payment_intent``; ``data.`` before
  it in a list) replaces an id by its object.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .effects import Problem, Refused
from .stripe_store import Store

FILTERS: dict[str, tuple[str, ...]] = {
    "payment_intent": ("customer",), "charge": ("customer", "payment_intent"),
    "refund": ("charge", "payment_intent"), "customer": ("email",), "event": ("type",),
}
SEARCH_FIELDS: dict[str, tuple[str, ...]] = {
    "payment_intent": ("amount", "created", "currency", "customer", "metadata", "status"),
    "charge": ("amount", "created", "currency", "customer", "metadata", "payment_intent", "refunded", "status"),
    "customer": ("created", "email", "metadata", "name", "phone"),
}
EXPANDABLE = {"latest_charge": "charge", "customer": "customer", "charge": "charge", "payment_intent": "payment_intent"}


def invalid(message: str, param: str | None = None) -> Refused:
    return Refused(Problem(message, param=param))


def page_size(params: dict[str, Any]) -> int:
    raw = params.get("limit", "10")
    if not (isinstance(raw, str) and raw.isdigit() and 1 <= int(raw) <= 100):
        raise invalid("Invalid integer: limit must be between 1 and 100.", "limit")
    return int(raw)


def listing(objects: list[dict[str, Any]], kind: str, params: dict[str, Any], url: str) -> dict[str, Any]:
    """One page of ``objects`` (newest first) after the list parameters."""
    limit = page_size(params)
    rows = [o for o in objects if all(str(o.get(f)) == params[f] for f in FILTERS[kind] if f in params)]
    ids = [o["id"] for o in rows]
    if params.get("starting_after"):
        if params["starting_after"] not in ids:
            raise invalid(f"No such {kind}: '{params['starting_after']}'", "starting_after")
        rows = rows[ids.index(params["starting_after"]) + 1:]
        page, more = rows[:limit], len(rows) > limit
    elif params.get("ending_before"):
        if params["ending_before"] not in ids:
            raise invalid(f"No such {kind}: '{params['ending_before']}'", "ending_before")
        rows = rows[:ids.index(params["ending_before"])]
        page, more = rows[-limit:], len(rows) > limit
    else:
        page, more = rows[:limit], len(rows) > limit
    return {"object": "list", "data": page, "has_more": more, "url": url}


# search -----------------------------------------------------------------------------------------

_CLAUSE = re.compile(r"""\s*(-?)(metadata\[(['"])(.+?)\3\]|[a-z_]+)\s*(:|~|>=|<=|>|<)\s*(?:(['"])(.*?)\6|(-?\d+))""")
_JOIN = re.compile(r"\s+(AND|OR)\s+")

Test = Callable[[dict[str, Any]], bool]


def _clause(kind: str, match: re.Match[str]) -> Test:
    negate, field, _, meta_key, op, _, text, number = match.groups()
    name = "metadata" if meta_key is not None else field
    if name not in SEARCH_FIELDS[kind]:
        raise invalid(f"Field `{field}` is an unsupported search field for resource `{kind}s`; supported: "
                      f"{', '.join(SEARCH_FIELDS[kind])}.", "query")
    wanted = text if text is not None else number

    def value(obj: dict[str, Any]) -> Any:
        return obj.get("metadata", {}).get(meta_key) if meta_key is not None else obj.get(field)

    def test(obj: dict[str, Any]) -> bool:
        have = value(obj)
        if op in (">", "<", ">=", "<="):
            if not isinstance(have, int) or number is None:
                return False
            n = int(number)
            return {">": have > n, "<": have < n, ">=": have >= n, "<=": have <= n}[op]
        if have is None:
            return False
        shown = str(have).lower()  # True -> "true", as the query writes it
        return wanted.lower() in shown if op == "~" else shown == wanted.lower()

    return (lambda obj: not test(obj)) if negate else test


def compile_query(kind: str, query: str) -> Test:
    """The test an object passes when it matches ``query`` (``Refused`` if the query is malformed)."""
    tests: list[Test] = []
    joins: set[str] = set()
    pos = 0
    while True:
        match = _CLAUSE.match(query, pos)
        if match is None:
            raise invalid(f"The query `{query}` is invalid: expected a clause at position {pos}.", "query")
        tests.append(_clause(kind, match))
        pos = match.end()
        if pos == len(query.rstrip()):
            break
        join = _JOIN.match(query, pos)
        if join is None:
            raise invalid(f"The query `{query}` is invalid: expected AND or OR at position {pos}.", "query")
        joins.add(join.group(1))
        pos = join.end()
    if len(joins) > 1:
        raise invalid("A query may use AND or OR, not both.", "query")
    if joins == {"OR"}:
        return lambda obj: any(t(obj) for t in tests)
    return lambda obj: all(t(obj) for t in tests)


def search(objects: list[dict[str, Any]], kind: str, params: dict[str, Any], url: str) -> dict[str, Any]:
    if not params.get("query"):
        raise invalid("Missing required param: query.", "query")
    test = compile_query(kind, params["query"])
    limit = page_size(params)
    start = int(params["page"]) if str(params.get("page", "")).isdigit() else 0
    rows = [o for o in objects if test(o)]
    page, more = rows[start:start + limit], len(rows) > start + limit
    return {"object": "search_result", "data": page, "has_more": more,
            "next_page": str(start + limit) if more else None, "url": url}


# expand -----------------------------------------------------------------------------------------


def expand(value: dict[str, Any], paths: Any, store: Store) -> dict[str, Any]:
    """``value`` with the ids at ``paths`` (``["latest_charge"]``, ``["data.customer"]``) replaced by objects."""
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list):
        return value
    for path in paths:
        value = _expand(value, str(path).split("."), store)
    return value


def _expand(value: Any, parts: list[str], store: Store) -> Any:
    if isinstance(value, list):
        return [_expand(v, parts, store) for v in value]
    if not isinstance(value, dict) or parts[0] not in value:
        raise invalid(f"This property cannot be expanded ({'.'.join(parts)}).", "expand")
    head, rest = parts[0], parts[1:]
    if rest:
        return {**value, head: _expand(value[head], rest, store)}
    found = store.get(EXPANDABLE.get(head, ""), value[head]) if isinstance(value[head], str) else None
    if found is None and isinstance(value[head], str):
        raise invalid(f"This property cannot be expanded ({head}).", "expand")
    return {**value, head: found if found is not None else value[head]}
