"""The project's import graph, read with `ast` (every import, at any depth, `TYPE_CHECKING` blocks too):
no cycle among its modules, and dependencies run one way (DESIGN.md): scenarios -> harness ->
(reference_agent, fake_services), which import nothing else of killpoint."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"harness": "killpoint", "scenarios": "killpoint.scenarios", "fake_services": "killpoint.fake_services",
         "reference_agent": "killpoint.reference_agent"}


def modules() -> dict[str, Path]:
    out = {}
    for folder, prefix in ROOTS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports (a `from pkg import mod` counts as importing pkg.mod)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "killpoint":
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def test_the_graph_is_read() -> None:
    g = graph()
    assert "killpoint.run.controller" in g["killpoint.run.trial"]
    assert "killpoint.reference_agent.checkpoint" in g["killpoint.reference_agent.step_module"]  # relative


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
