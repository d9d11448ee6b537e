"""The project's import graph, read with `ast` (every import, at any depth, `TYPE_CHECKING` blocks too), and
the layer rules it must keep (docs/architecture.md, "Layers"):

1. No cycle among the project's modules.
2. Dependencies run one way: scenarios -> harness -> (reference_agent, fake_services), which import nothing
   else of killpoint.
3. Layers inside the harness (`FORBIDDEN`): the fault language (`killpoint.faults`) and the checkers
   (`killpoint.checkers`) are pure, and import nothing of the run, the environment, the reference agent,
   the CLI or the reports; the environment (`killpoint.env`) never imports the run, the CLI, the reports or
   the scenarios.
4. The harness reaches the reference agent only through its step-module interface (`GATES`): each module
   of the reference agent the harness may import, the harness modules that may import it, and whether only
   inside a function (lazily). Any other import of the reference agent from the harness is a violation.
   (Scenarios are not the harness: they may drive the reference runtime's own parts, e.g. its sweeper.)
5. `KNOWN` lists the violations tolerated for now, each with its reason, in this one place; a listed
   violation that no longer occurs fails too, so the list never outlives its reason.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"harness": "killpoint", "scenarios": "killpoint.scenarios", "fake_services": "killpoint.fake_services",
         "reference_agent": "killpoint.reference_agent"}

Graph = dict[str, dict[str, bool]]
"""module -> {imported module: True when imported at module level (eagerly), False when only in functions}."""

AGENT = "killpoint.reference_agent"
OUTSIDE_HARNESS = ("killpoint.scenarios", AGENT, "killpoint.fake_services")

_OUTER = ("killpoint.run", "killpoint.env", AGENT, "killpoint.cli", "killpoint.report")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "killpoint.faults": _OUTER,  # the fault language: pure, tested without Postgres
    "killpoint.checkers": _OUTER,  # judges a recorded history: pure, and re-judges an old run directory
    "killpoint.env": ("killpoint.run", "killpoint.cli", "killpoint.report", "killpoint.scenarios"),
}
"""Rule 3: a harness package -> the packages it must not import (nor any module below them)."""


@dataclass(frozen=True)
class Gate:
    """Harness modules allowed to import one module of the reference agent (rule 4), and why."""

    importers: frozenset[str]
    lazy: bool
    """True: only inside a function (the importer is imported where the agent must not be)."""
    why: str


GATES: dict[str, Gate] = {
    f"{AGENT}.step_module": Gate(
        frozenset({"killpoint.env.stepmodule"}), lazy=False,
        why="the step-module contract and its one loader; env.stepmodule is the harness's view of it "
            "(AgentSpec, load, check) and hands on its names (DEFAULT_STEPS, TERMINAL)"),
    f"{AGENT}.schema": Gate(
        frozenset({"killpoint.env.stepmodule"}), lazy=True,
        why="the reference runtime's tables, created before any run (env.stepmodule.ensure_schema); "
            "lazily, since it imports psycopg (0.4 s) and `killpoint --help` must not pay it"),
    f"{AGENT}.submit": Gate(
        frozenset({"killpoint.env.stepmodule"}), lazy=True,
        why="a fleet's runs started as the reference runtime's application starts them (a first checkpoint "
            "and a resume job each: env.stepmodule.submit_runs, for the seeds' table adapter); lazily, psycopg"),
    f"{AGENT}.worker": Gate(
        frozenset({"killpoint.env.forkserver"}), lazy=True,
        why="the worker's entry point (main, tables_present, take_session, warm), run in a forked child of the fork "
            "server; lazily, inside the server process only"),
}
"""Rule 4: a module of the reference agent -> who in the harness may import it."""

KNOWN: dict[tuple[str, str], str] = {}
"""Rule 5: (importer, imported) -> why the violation is tolerated for now."""


def modules() -> dict[str, Path]:
    out = {}
    for folder, prefix in ROOTS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = path
    return out


def _statements(tree: ast.AST, eager: bool = True) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement below `tree`, with whether it runs when the module is imported (not inside a
    function or lambda)."""
    out: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append((node, eager))
        inner = eager and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        out += _statements(node, inner)
    return out


def imports(name: str, path: Path, known: set[str]) -> dict[str, bool]:
    """The project modules `name` imports, each True when imported eagerly (a `from pkg import mod` counts
    as importing pkg.mod)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, bool] = {}
    for node, eager in _statements(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "killpoint":
                found[target] = found.get(target, False) or eager
    return found


def graph() -> Graph:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def within(name: str, package: str) -> bool:
    """True when `name` is `package` or a module below it."""
    return name == package or name.startswith(package + ".")


def layer_violations(g: Graph) -> dict[tuple[str, str], str]:
    """Every import of `g` that breaks rule 3 or 4: (importer, imported) -> what is wrong."""
    wrong: dict[tuple[str, str], str] = {}
    for name, deps in g.items():
        if not within(name, "killpoint") or any(within(name, p) for p in OUTSIDE_HARNESS):
            continue
        for dep, eager in deps.items():
            for layer, banned in FORBIDDEN.items():
                hit = next((b for b in banned if within(name, layer) and within(dep, b)), None)
                if hit:
                    wrong[(name, dep)] = f"{layer} must not import {hit}"
            if within(dep, AGENT):
                gate = GATES.get(dep)
                if gate is None or name not in gate.importers:
                    wrong.setdefault((name, dep), "the harness reaches the reference agent only through GATES")
                elif gate.lazy and eager:
                    wrong.setdefault((name, dep), "allowed only inside a function (lazily)")
    return wrong


def test_the_graph_is_read() -> None:
    g = graph()
    assert "killpoint.run.controller" in g["killpoint.run.trial"]
    assert "killpoint.reference_agent.checkpoint" in g["killpoint.reference_agent.step_module"]  # relative
    assert g["killpoint.env.forkserver"]["killpoint.reference_agent.worker"] is False  # inside a function
    assert g["killpoint.env.forkserver"]["killpoint.env.procutil"] is True


def test_no_import_cycle() -> None:
    g = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(g.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_dependencies_run_one_way() -> None:
    g = graph()
    wrong = []
    for name, deps in g.items():
        for dep in deps:
            if name.startswith(("killpoint.reference_agent", "killpoint.fake_services")):
                own = ".".join(name.split(".")[:2])
                if not dep.startswith(own):
                    wrong.append(f"{name} imports {dep}")
            elif not name.startswith("killpoint.scenarios") and dep.startswith("killpoint.scenarios"):
                wrong.append(f"{name} imports {dep}")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_layers_hold() -> None:
    found = layer_violations(graph())
    new = [f"{a} imports {b}: {why}" for (a, b), why in sorted(found.items()) if (a, b) not in KNOWN]
    stale = [f"{a} imports {b}" for a, b in sorted(KNOWN) if (a, b) not in found]
    assert not new, "layer violations:\n" + "\n".join(new)
    assert not stale, "no longer violations, remove them from KNOWN:\n" + "\n".join(stale)


def test_the_layer_rules_fail_on_a_violation() -> None:
    clean: Graph = {
        "killpoint.faults.strategies": {"killpoint.faults.schedule": True},
        "killpoint.checkers.outcome": {"killpoint.checkers.pricing": True},
        "killpoint.env.stepmodule": {f"{AGENT}.step_module": True, f"{AGENT}.schema": False},
        "killpoint.env.forkserver": {f"{AGENT}.worker": False},
        "killpoint.run.points": {"killpoint.env.stepmodule": False, "killpoint.faults.strategies": False},
        "killpoint.scenarios.fleet": {f"{AGENT}.sweeper": True},  # not the harness
    }
    assert layer_violations(clean) == {}
    violating: Graph = {
        "killpoint.faults.strategies": {"killpoint.run.points": False},  # lazily is no excuse
        "killpoint.checkers.outcome": {f"{AGENT}.pricing": True},
        "killpoint.checkers": {"killpoint.report.text": False},
        "killpoint.env.launcher": {"killpoint.run.history": True, "killpoint.scenarios": False},
        "killpoint.env.forkserver": {f"{AGENT}.worker": True, f"{AGENT}.context": False},
        "killpoint.run.points": {f"{AGENT}.schema": False},
        "killpoint.plugin": {f"{AGENT}": False},
    }
    assert sorted(layer_violations(violating)) == sorted(
        (name, dep) for name, deps in violating.items() for dep in deps)
