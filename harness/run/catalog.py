"""The names and summaries of the registered scenarios, read without importing them.

Importing a scenario module imports the harness behind it (psycopg, the environment, the fake services), so
`killpoint scenarios`, `--help` and a misspelt `--scenario` would pay for machinery they never use.

1. `entries()` lists the entry points of the group `killpoint.scenarios` (package metadata only).
2. For each, the module's source is found (`importlib.util.find_spec`, which imports its parent packages
   only) and parsed with `ast`; the class the entry point names gives `name` and `summary` when its body
   assigns them string literals.
3. An entry whose source cannot be read that way (no source, another kind of object, a computed summary)
   is imported and asked, as `scenario.registry` does: the answer is the same, only slower.
4. The list is read once per process (installed packages do not change under a run): `killpoint run` asks
   for every scenario it runs by name.
5. `known(name)` is that name, or the one-line refusal of a misspelt one, naming the scenarios there are:
   what `--scenario` and `--skip-scenario` are checked by while the command line is parsed.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from killpoint.errors import UsageError


@dataclass(frozen=True)
class Entry:
    """One registered scenario: its name, its one-line summary, and where it lives."""

    name: str
    summary: str
    entry_point: EntryPoint


@functools.cache
def entries() -> dict[str, Entry]:
    """Every registered scenario by name, sorted (flow steps 1-4)."""
    out: dict[str, Entry] = {}
    for ep in entry_points(group="killpoint.scenarios"):
        found = _from_source(ep) or _from_import(ep)
        out[found.name] = found
    return dict(sorted(out.items()))


def known(name: str) -> str:
    """`name`, if a scenario is registered under it; else the refusal (flow step 5)."""
    names = entries()
    if name not in names:
        raise UsageError("unknown-scenario", f"no scenario named {name!r}",
                         f"use one of: {', '.join(names) or '(none registered: pip install -e .)'}")
    return name


def _from_source(ep: EntryPoint) -> Entry | None:
    """The entry read from its module's source, or None when the source does not say (flow step 2)."""
    try:
        spec = importlib.util.find_spec(ep.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), spec.origin)
    except (OSError, SyntaxError, ValueError):
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == ep.attr), None)
    if cls is None:
        return None
    fields: dict[str, str] = {}
    for node in cls.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            fields[node.targets[0].id] = node.value.value
    if "summary" not in fields:
        return None
    return Entry(fields.get("name") or ep.name, fields["summary"], ep)


def _from_import(ep: EntryPoint) -> Entry:
    """The entry asked of the imported scenario (flow step 3)."""
    obj = ep.load()
    scenario = obj() if isinstance(obj, type) else obj
    return Entry(scenario.name or ep.name, scenario.summary, ep)
