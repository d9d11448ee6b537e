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
   a global holding the string, `StepContext.model`) or `anthropic`, or if `anthropic` is imported already (a module that imports the
   SDK itself has paid for it).
3. When in doubt it says yes: past `LIMIT` pieces of code, or on any error while looking.
4. The answer for a set of modules is kept (a fork server's children inherit it).

A wrong "no" costs time, never correctness: a step that calls the model after all builds the client then,
importing the SDK at its first call. Only code that builds the name at run time (`"".join(("mo", "del"))`)
gets it.
"""

from __future__ import annotations

import functools
import inspect
import sys
import sysconfig
from collections.abc import Container, Iterable
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


_answers: dict[tuple[tuple[str, int], ...], bool] = {}


def may_call_model(modules: Iterable[ModuleType], imported: Container[str] = sys.modules) -> bool:
    """Whether code of `modules` may reach the model client (the module docstring's contract); `imported`:
    the names of the modules imported so far."""
    if "anthropic" in imported:
        return True
    modules = list(modules)
    key = tuple(sorted((m.__name__, id(m)) for m in modules))
    if key not in _answers:
        try:
            _answers[key] = _reaches(modules)
        except Exception:  # noqa: BLE001 - looking at arbitrary objects: any surprise means "maybe"
            _answers[key] = True
    return _answers[key]


STDLIB = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})
INSTALLED = frozenset({"site-packages", "dist-packages"})


def library(name: str | None, own: Container[str]) -> bool:
    """Whether module `name` is an installed library or the standard library rather than the agent's own code:
    a module of none of the packages `own`, nor of the reference agent (whose steps a step module may
    reuse), found under site-packages, dist-packages or the standard library's folder, or with no file."""
    if name is None or name.split(".")[0] in own or name.startswith(REFERENCE):
        return False
    file = getattr(sys.modules.get(name), "__file__", None)
    if not file:
        return True
    return not INSTALLED.isdisjoint(Path(file).parts) or file.startswith(STDLIB)


def _reaches(modules: Iterable[ModuleType]) -> bool:
    seen: set[int] = set()
    work: list[tuple[CodeType, dict[str, Any]]] = []
    modules = list(modules)
    own = {m.__name__.split(".")[0] for m in modules}

    def add(obj: Any, names: Iterable[str] | None = None) -> None:
        """Queue the code of `obj`: a function's, a class's methods', a module's functions and classes (those
        of `names` only, when given); not a library's (`library`)."""
        if id(obj) in seen:
            return
        if isinstance(obj, FunctionType | type) and library(obj.__module__, own):
            seen.add(id(obj))
            return
        if isinstance(obj, ModuleType):
            if names is not None and library(obj.__name__, own):
                return
            if names is None:  # a step module: what it defines (what it imports is followed where used)
                seen.add(id(obj))
                for name, value in list(vars(obj).items()):
                    if isinstance(value, type | FunctionType):
                        if value.__module__ == obj.__name__:
                            add(value)
                    elif name in CONTRACT:
                        add(value)
                return
            for name in names:
                value = getattr(obj, name, None)
                if isinstance(value, type | FunctionType | MethodType):
                    add(value)
            return
        seen.add(id(obj))
        if isinstance(obj, staticmethod | classmethod):
            add(obj.__func__)
        elif isinstance(obj, property):
            for part in (obj.fget, obj.fset, obj.fdel):
                if part is not None:
                    add(part)
        elif isinstance(obj, MethodType):
            add(obj.__func__)
        elif isinstance(obj, dict | list | tuple | set | frozenset):  # a table of steps or handlers
            for item in list(obj.values() if isinstance(obj, dict) else obj):
                if callable(item) or isinstance(item, dict | list | tuple):
                    add(item)
        elif isinstance(obj, functools.partial):
            add(obj.func)
            for value in (*obj.args, *obj.keywords.values()):
                if callable(value):
                    add(value)
        elif isinstance(obj, FunctionType):
            work.append((obj.__code__, obj.__globals__))
            for value in (obj.__defaults__ or ()):
                if callable(value):
                    add(value)
        elif isinstance(obj, type) and obj.__module__ != "builtins":
            for value in vars(obj).values():
                add(value)
        elif not inspect.isbuiltin(obj) and isinstance(vars(type(obj)).get("__call__"), FunctionType):
            add(vars(type(obj))["__call__"])  # an instance whose class defines __call__ in Python

    for module in modules:
        add(module)
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
            value = globals_.get(name)
            if value is None:
                continue
            if isinstance(value, ModuleType):
                modules_used.append(value)
            elif isinstance(value, str):
                if value in NAMES:  # getattr(ctx, CLIENT) with CLIENT = "model"
                    return True
            else:
                add(value)
        for module in modules_used:  # `pkg.helper(...)`: the attribute names are among the same co_names
            add(module, [n for n in code.co_names if n in vars(module)])
        for const in code.co_consts:
            if isinstance(const, CodeType):
                work.append((const, globals_))
    return False
