"""Whether a step module may call the model: what decides if a worker builds the SDK ahead, and if a fork
server imports it ahead.

The runtime's model client (`ctx.model`, the anthropic SDK) costs ~1.2 s and ~50 MB per process to import.
A worker builds it before its first step (`worker.main`), and the harness's fork server imports it before
it forks, unless `may_call_model` is sure no step can reach it; the client is then built on first use
(`Resources.sdk`), if ever. The contract:

1. The code looked at starts from what the runtime calls of the step modules (`STEPS`, `MIGRATIONS`,
   `initial_state`, `setup`, wherever they were defined) and every function and class they define, and
   follows each name a piece of code uses to the object it is in that code's globals: a function, a class
   (its methods), a table (the callables it holds), a module (those of its functions and classes whose
   names the same code uses), across the agent's own modules and packages and the reference agent's,
   nested code included; not into installed libraries or the standard library (`library`), where `model`
   is the library's own word (an OpenAI agent's `Agent.model`), not the runtime's client.
2. It may call the model if any code reached uses the name `model` (`ctx.model`, `getattr(ctx, "model")`,
   a global holding the string, `StepContext.model`) or `anthropic`, or if `anthropic` is imported already
   (a module that imports the SDK itself has paid for it).
3. Looking runs none of the agent's code: namespaces are read as Python holds them (no module `__getattr__`,
   property, metaclass or overridden `values()` is called).
4. When in doubt it says yes: past `LIMIT` pieces of code, or on any error while looking.
5. Each step module's answer is kept (a fork server's children inherit it: a worker asks again for its
   own module, one of those its server asked about).

A wrong "no" costs time, never correctness: a step that calls the model after all builds the client then,
importing the SDK at its first call. Only code that builds the name at run time (`"".join(("mo", "del"))`)
gets it.
"""

from __future__ import annotations

import functools
import sys
import sysconfig
from collections.abc import Container, Iterable, Mapping
from pathlib import Path
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import Any

NAMES = frozenset({"model", "anthropic"})
"""A piece of code that uses one of these (as a name, an attribute or a string constant) may call the model."""

CONTRACT = frozenset({"STEPS", "MIGRATIONS", "initial_state", "setup"})
"""What a step module holds that the runtime calls (contracts.md section 4), wherever it was defined."""

REFERENCE = __name__.rsplit(".", 1)[0]
"""The reference agent's package (`killpoint.reference_agent`): its steps are followed wherever it is installed."""

LIMIT = 20_000
"""Pieces of code looked at before giving up (and saying yes): a step that reaches into a large library."""

STDLIB = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})
"""The standard library's folders: its modules are libraries (`library`)."""

INSTALLED = frozenset({"site-packages", "dist-packages"})
"""Folders whose modules are installed libraries (`library`)."""


_answers: dict[tuple[str, int], bool] = {}
"""Each step module's answer, by its name and identity (a fork server's children inherit them)."""


def may_call_model(modules: Iterable[ModuleType], imported: Container[str] = sys.modules) -> bool:
    """Whether code of any of `modules` may reach the model client (the module docstring's contract);
    `imported`: the names of the modules imported so far."""
    if "anthropic" in imported:
        return True
    return any(_answer(module) for module in modules)


def _answer(module: ModuleType) -> bool:
    key = (module.__name__, id(module))
    if key not in _answers:
        try:
            _answers[key] = _reaches(module)
        except Exception:  # noqa: BLE001 - looking at arbitrary objects: any surprise means "maybe"
            _answers[key] = True
    return _answers[key]


def library(name: str | None, own: Container[str]) -> bool:
    """Whether module `name` is an installed library or the standard library rather than the agent's own code:
    a module of none of the packages `own`, nor of the reference agent (whose steps a step module may
    reuse), found under site-packages, dist-packages or the standard library's folder, or with no file."""
    if name is None or name.split(".")[0] in own or name.startswith(REFERENCE):
        return False
    module = sys.modules.get(name)
    file = _own(module).get("__file__") if module is not None else None
    if not isinstance(file, str) or not file:
        return True
    return not INSTALLED.isdisjoint(Path(file).parts) or file.startswith(STDLIB)


def _own(obj: Any) -> Mapping[str, Any]:
    """The namespace of a module or class as Python holds it (no `__getattribute__` or `__dict__` of its own
    or of its metaclass is run)."""
    if issubclass(type(obj), ModuleType):
        return ModuleType.__dict__["__dict__"].__get__(obj)
    return type.__dict__["__dict__"].__get__(obj)


def _module_of(obj: Any) -> str | None:
    """The module a function or class says it was defined in, read without running its class's code."""
    if type(obj) is FunctionType:
        return obj.__module__
    value = _own(obj).get("__module__")
    return value if isinstance(value, str) else None


def _members(obj: Any, kind: type) -> Iterable[Any]:
    """The items of a list, tuple, set or frozenset (or of a subclass, by the built-in's own iterator)."""
    for base in (list, tuple, set, frozenset):
        if issubclass(kind, base):
            return base.__iter__(obj)
    return ()


def _reaches(step_module: ModuleType) -> bool:
    seen: set[int] = set()
    work: list[tuple[CodeType, dict[str, Any]]] = []
    own = {step_module.__name__.split(".")[0]}

    def add(obj: Any, names: Iterable[str] | None = None) -> None:
        """Queue the code of `obj`: a function's, a class's methods', a module's functions and classes (those
        of `names` only, when given); not a library's (`library`). Looks only at what Python holds: no
        attribute of `obj` is computed (a module's `__getattr__`, a property, an overridden `values()`)."""
        if id(obj) in seen:
            return
        kind = type(obj)
        if issubclass(kind, ModuleType):
            space = _own(obj)
            if names is not None:
                if not library(space.get("__name__"), own):
                    for name in names:
                        value = space.get(name)
                        if issubclass(type(value), type | FunctionType | MethodType):
                            add(value)
                return
            seen.add(id(obj))  # a step module: what it defines (what it imports is followed where used)
            for name, value in list(space.items()):
                if issubclass(type(value), type | FunctionType):
                    if _module_of(value) == space.get("__name__"):
                        add(value)
                elif name in CONTRACT:
                    add(value)
            return
        seen.add(id(obj))
        if issubclass(kind, FunctionType | type) and library(_module_of(obj), own):
            return
        if kind is FunctionType:
            work.append((obj.__code__, obj.__globals__))
            for value in (obj.__defaults__ or ()):
                if callable(value):
                    add(value)
        elif issubclass(kind, type):
            if _module_of(obj) != "builtins":
                for value in list(_own(obj).values()):
                    add(value)
        elif kind in (staticmethod, classmethod, MethodType):
            add(obj.__func__)
        elif kind is property:
            for part in (obj.fget, obj.fset, obj.fdel):
                if part is not None:
                    add(part)
        elif kind is functools.cached_property:
            add(obj.func)
        elif kind is functools.partial:
            add(obj.func)
            for value in (*obj.args, *obj.keywords.values()):
                if callable(value):
                    add(value)
        elif issubclass(kind, dict | list | tuple | set | frozenset):  # a table of steps or handlers
            items = dict.values(obj) if issubclass(kind, dict) else _members(obj, kind)
            for item in list(items):
                if callable(item) or issubclass(type(item), dict | list | tuple):
                    add(item)
        elif type(_own(kind).get("__call__")) is FunctionType:
            add(_own(kind)["__call__"])  # an instance whose class defines __call__ in Python

    add(step_module)
    looked = 0
    while work:
        code, globals_ = work.pop()
        looked += 1
        if looked > LIMIT:
            return True
        if not NAMES.isdisjoint(code.co_names) or any(
                isinstance(c, str) and c in NAMES for c in code.co_consts):
            return True
        modules_used = []
        for name in code.co_names:
            value = dict.get(globals_, name)
            if value is None:
                continue
            if issubclass(type(value), ModuleType):
                modules_used.append(value)
            elif type(value) is str:
                if value in NAMES:  # getattr(ctx, CLIENT) with CLIENT = "model"
                    return True
            else:
                add(value)
        for module in modules_used:  # `pkg.helper(...)`: the attribute names are among the same co_names
            add(module, [n for n in code.co_names if n in _own(module)])
        for const in code.co_consts:
            if isinstance(const, CodeType):
                work.append((const, globals_))
    return False
