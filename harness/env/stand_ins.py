"""Per-run variables a preloaded library reads at import: a stand-in in the server, each child's own value
bound in its place.

The resend SDK does `api_url = os.environ.get("RESEND_API_URL", ...)` at import, and that URL is per run: a
server importing it would give every incarnation its own value. Left out of the preload, every incarnation
imported the SDK itself (~100 modules, ~50 ms of a forked LangGraph incarnation's ~110). Instead:

1. While the server imports its preload (`pymain.preload`), a lookup of a per-run variable it lacks
   (`pymain.volatile`) gets a stand-in (`stand_in`): a `str` of its own class, one per lookup, whose
   every operation marks it used, but for a truth test (a non-empty value is true; 4. makes it so).
2. After each module's import, `bindings(made)` judges the stand-ins that import made: each unused one
   held only by the globals of modules (its reference count is exactly that, so a list, a class, a closure
   or a C structure holding it is seen) is bound: `{"module.name": variable}`. One used (compared, joined,
   parsed, formatted at import) or held elsewhere cannot be (None and why): the module's value was made
   from the server's stand-in, and the server leaves the module out as before.
3. In each child, `bind` sets each bound global to the incarnation's value of its variable before the
   worker's code runs: what `x = os.environ.get(VAR)` gave a fresh interpreter importing the module.
4. The launcher forks only an incarnation that has each bound variable set and non-empty (the stand-in was
   present and true); others are exec'd (harness/env/pyfork_launcher.py).
5. The stand-ins stay in the server's modules; a later import (harness/env/preload_learning.py) that uses
   one or holds it anew is refused (`intact`).

Not seen: a read of its characters by C code that takes the string's buffer without a method call (a
regular expression's match, `str.join`, `json.dumps`, `open`): what that made from the stand-in's text
(`killpoint-stand-in:VAR`, no URL, no path) would reach the children. The libraries found reading a per-run
variable at import (resend) store it and nothing else.
"""

from __future__ import annotations

import sys
import types
from typing import Any

TEXT = "killpoint-stand-in:"
"""A stand-in's text: this and its variable's name."""


class _StandIn(str):
    """A per-run variable's value in the server (1. of the module doc). Its `used` is set by any operation
    but a truth test (the methods are wrapped below)."""

    var: str
    used: bool

    def __bool__(self) -> bool:
        return True


def _marking(name: str) -> Any:
    method = getattr(str, name)

    def marked(self: _StandIn, *args: Any, **kwargs: Any) -> Any:
        self.__dict__["used"] = True
        return method(self, *args, **kwargs)

    marked.__name__ = name
    return marked


_UNMARKED = {"__new__", "__init__", "__init_subclass__", "__subclasshook__", "__getattribute__",
             "__setattr__", "__delattr__", "__class__", "__dir__", "__sizeof__", "__bool__"}
for _name in dir(str):
    if _name not in _UNMARKED and callable(getattr(str, _name)):
        setattr(_StandIn, _name, _marking(_name))


def _reflected(self: _StandIn, other: Any) -> Any:
    """`"x" + v`, `"%s" % v`: the right operand's reflected method is tried first; marked, the left's runs."""
    self.__dict__["used"] = True
    return NotImplemented


_StandIn.__radd__ = _StandIn.__rmod__ = _reflected  # type: ignore[attr-defined]

made: list[_StandIn] = []
"""Every stand-in given out in this process, in order."""

_bound: dict[tuple[str, str], str] = {}
"""(module, global) -> variable: what `bind` sets in a child."""

_refs: dict[int, int] = {}
"""A bound stand-in's index in `made` -> its reference count when bound (`intact` compares)."""


def stand_in(var: str, kept: bool = True) -> str:
    """A new stand-in for variable `var` (1. of the module doc); `kept` False for a membership test
    (`VAR in os.environ`: the mapping looks the value up and drops it)."""
    value = _StandIn(TEXT + var)
    value.__dict__.update(var=var, used=False, kept=kept)
    made.append(value)
    return value


def _holders(targets: dict[int, _StandIn]) -> dict[int, list[tuple[str, str]]]:
    """Where the globals of the modules in `sys.modules` hold each of `targets` (by id): (module, name)."""
    found: dict[int, list[tuple[str, str]]] = {i: [] for i in targets}
    for mod_name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType):
            continue
        try:
            namespace = object.__getattribute__(module, "__dict__")  # a lazy module's own lookup would load it
        except AttributeError:
            continue
        for key, value in list(namespace.items()):
            if type(value) is _StandIn and id(value) in targets:
                found[id(value)].append((mod_name, key))
    return found


def _baseline() -> int:
    """The reference count of a stand-in held by `made` alone, as `_count` reads it."""
    made.append(_StandIn(TEXT))  # no local name: it would be one more reference
    try:
        return _count(len(made) - 1)
    finally:
        made.pop()


def _count(index: int) -> int:
    return sys.getrefcount(made[index])


def bindings(start: int) -> tuple[dict[str, list[str]] | None, str]:
    """Judge the stand-ins made since `made[start]` (2. of the module doc): each variable stood in for and the
    globals bound to it (`{variable: ["module.name", ...]}`) and "", or None and why not. A looked-up value
    held nowhere was handed to something that kept no reference to it (parsed, say): not bound either. The
    bound ones are remembered for `bind`."""
    fresh = range(start, len(made))
    used = sorted({made[i].var for i in fresh if made[i].used})
    if used:
        return None, f"its import looked at the value of {', '.join(used)}"
    holders = _holders({id(made[i]): made[i] for i in fresh})
    base = _baseline()
    out: dict[str, list[str]] = {}
    for i in fresh:
        places = holders[id(made[i])]
        if _count(i) != base + len(places):
            return None, f"its import kept the value of {made[i].var} elsewhere than in a module's globals"
        if made[i].kept and not places:  # read by C code (a regular expression), say: what it made is unseen
            return None, f"its import passed on the value of {made[i].var} and kept it in no module's globals"
        out[made[i].var] = sorted({*out.get(made[i].var, ()), *(f"{m}.{k}" for m, k in places)})
    for i in fresh:
        for m, k in holders[id(made[i])]:
            _bound[(m, k)] = made[i].var
        _refs[i] = _count(i)
    return out, ""


def intact() -> tuple[str, str] | None:
    """None if no stand-in was used or newly held since `bindings` judged it (5. of the module doc), else
    the variable whose was and how: ("used", VAR) or ("kept", VAR)."""
    for i in range(len(made)):
        if made[i].used:
            return "used", made[i].var
        if i in _refs and _count(i) != _refs[i]:
            return "kept", made[i].var
    return None


def bind() -> None:
    """In a child: each bound global set to the incarnation's value of its variable (3. of the module doc)."""
    import os

    for (module, name), var in _bound.items():
        namespace = object.__getattribute__(sys.modules[module], "__dict__")
        namespace[name] = os.environ[var]
