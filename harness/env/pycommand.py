"""A `--worker-cmd` that is this Python running a script or a module, and what its fork servers preload.

A black-box worker written in Python (`python invoice_graph.py {run_id}`, `python -m pkg.worker {run_id}`)
pays its framework's import (LangGraph, DBOS: ~1-5 s) in every incarnation when each is a fresh
interpreter. When the command is one `PythonCommand` can stand for, its incarnations are forked instead
from fork servers that imported the framework once (harness/env/pyfork_launcher.py says when, and when not).

1. `parse(argv)`: the command as a `PythonCommand`, or one line saying why it cannot be forked: another
   interpreter than the one running killpoint (a fork server runs killpoint's own; one that resolves to
   the same executable in the same folder counts as the same), an interpreter option (`-X`, `-O`, `-u`...
   are not reproduced by a fork), `{run_id}` in the script or module name, a script that does not exist.
2. `auto_preload(cmd)`: the preload list chosen with no configuration, found without running anything: the
   modules the script (or the module's source file) imports at its top level (`import a.b` -> `a.b`, `from
   a.b import c` -> `a.b`, also inside a top-level `if`/`try`/`with`, never inside a function or class, nor
   under `if TYPE_CHECKING`), less `__future__`, relative imports, and every module of the worker's own
   folder (the script's folder, or the working directory for `-m`): the worker's own code is what is under
   test and is imported afresh by every incarnation, as it would be in production; only the libraries it
   stands on are preloaded. `--worker-preload MOD,...` replaces the list, `--worker-preload none` turns
   forking off (`preload_option`). A `-m` module found only through an import hook (an editable install's
   finder) is not read: nothing is preloaded from its imports, and every incarnation is exec'd (name the
   modules with `--worker-preload` to fork it).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
from dataclasses import dataclass
from importlib.machinery import PathFinder

from killpoint.env.egress import RUN_ARG

NONE = "none"
"""`--worker-preload none`: every incarnation is a fresh interpreter (the exec launcher), as before."""


@dataclass(frozen=True)
class PythonCommand:
    """`python SCRIPT ARGS` or `python -m MODULE ARGS`, with `{run_id}` still in `args`."""

    script: str | None
    """The script as given on the command line (relative to the working directory), or None with `module`."""
    module: str | None
    """The module of `-m`, or None with `script`."""
    args: tuple[str, ...]

    @property
    def folder(self) -> str:
        """`sys.path[0]` of a fresh interpreter running it: the script's folder (symlinks resolved), or the
        working directory for `-m`."""
        if self.script is not None:
            return os.path.dirname(os.path.realpath(self.script))
        return os.getcwd()

    def argv(self, run_id: str) -> list[str]:
        """The worker's arguments (after the script or module) for `run_id`."""
        return [a.replace("{run_id}", run_id) for a in self.args]

    def spec(self) -> dict[str, str | None]:
        """How `harness/env/pymain.py` runs it as `__main__`: its script or module, and its folder."""
        return {"script": self.script, "module": self.module, "folder": self.folder}

    def guarded_argv(self) -> list[str]:
        """A fresh interpreter running this worker behind the egress guard: `python -P -m
        killpoint.env.egress --run SPEC ARGS` installs the guard, puts `folder` first on `sys.path` and runs
        the script or module as `__main__` as the forked children do (harness/env/pymain.py). `{run_id}`
        is still in the arguments (the exec launcher fills it in)."""
        return [sys.executable, "-P", "-m", "killpoint.env.egress", RUN_ARG, json.dumps(self.spec()), *self.args]

    def source(self) -> str | None:
        """The path of the code run as `__main__` (the script, or the module's file found without importing
        its package), or None if it cannot be found."""
        if self.script is not None:
            return self.script
        assert self.module is not None
        return module_file(self.module, self.folder)


def same_interpreter(name: str) -> bool:
    """True if the command word `name` runs this interpreter: the same file (after PATH), or a link in the
    same folder (a venv's `python` and `python3`) to the same executable."""
    found = shutil.which(name)
    if found is None:
        return False
    mine, theirs = os.path.abspath(sys.executable), os.path.abspath(found)
    if mine == theirs:
        return True
    return os.path.dirname(mine) == os.path.dirname(theirs) and os.path.realpath(mine) == os.path.realpath(theirs)


def parse(argv: list[str]) -> PythonCommand | str:
    """The command as a `PythonCommand`, or why its incarnations cannot be forked (module doc, 1)."""
    if not argv or not os.path.basename(argv[0]).startswith("python"):
        return "the command is not a Python interpreter running a script or a module"
    if not same_interpreter(argv[0]):
        return (f"{argv[0]!r} is not the interpreter killpoint runs on ({sys.executable}): its fork servers "
                "could not import the same packages")
    rest = argv[1:]
    if not rest:
        return "the command runs no script or module"
    first = rest[0]
    if first == "-m" or (first.startswith("-m") and len(first) > 2):
        module = rest[1] if first == "-m" and len(rest) > 1 else first[2:]
        args = rest[2:] if first == "-m" else rest[1:]
        if not module or "{run_id}" in module:
            return "the module of -m is missing or names {run_id}"
        return PythonCommand(script=None, module=module, args=tuple(args))
    if first.startswith("-"):
        return f"the interpreter option {first} is not reproduced by a fork"
    if "{run_id}" in first:
        return "the script's path names {run_id}"
    if not os.path.isfile(first):
        return f"the script {first!r} is not a file"
    return PythonCommand(script=first, module=None, args=tuple(rest[1:]))


def module_file(name: str, folder: str) -> str | None:
    """The source file of module `name` as found from `folder` first, then the import path, without
    importing (nor running) its packages; None if not found or not a source file."""
    path: list[str] | None = [folder, *sys.path]
    spec = None
    for i, part in enumerate(name.split(".")):
        spec = PathFinder.find_spec(".".join(name.split(".")[: i + 1]) if i else part, path)
        if spec is None:
            return None
        path = list(spec.submodule_search_locations or [])
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package run with -m runs its __main__
        return module_file(f"{name}.__main__", folder)
    origin = spec.origin
    return origin if origin and origin.endswith(".py") else None


def top_level_imports(source: str) -> list[str]:
    """The absolute modules `source` imports at its top level (module doc, 2), in order, each once."""
    out: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and node.module and node.module != "__future__":
                    out.append(node.module)
            elif isinstance(node, ast.If):
                if not _type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                visit(node.body)

    visit(ast.parse(source).body)
    return list(dict.fromkeys(out))


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def own(module: str, folder: str) -> bool:
    """True if `module`'s top-level package or module is found in `folder` (the worker's own code)."""
    return PathFinder.find_spec(module.split(".")[0], [folder]) is not None


def auto_preload(cmd: PythonCommand) -> list[str]:
    """The modules to preload for `cmd` with no configuration (module doc, 2); empty if its source cannot
    be read or parsed (it then fails the same way in a fresh interpreter)."""
    path = cmd.source()
    if path is None:
        return []
    try:
        with open(path, "rb") as f:
            names = top_level_imports(f.read().decode("utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [n for n in names if not own(n, cmd.folder)]


def preload_option(text: str | None) -> tuple[str, ...] | None:
    """`--worker-preload`: None (not given: `auto_preload`), () for `none`, else the modules named."""
    if text is None:
        return None
    if text.strip().lower() == NONE:
        return ()
    return tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
