"""The rooms import one way: retrieval knows nothing of agent or tui, and no module imports
itself back through others (lazy imports inside functions count; TYPE_CHECKING ones do not)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"agent": "codeqa.agent", "retrieval": "codeqa.retrieval", "tui": "codeqa.tui"}
PACKAGES["evals"] = "codeqa.evals"


def _module_names() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names[".".join((package, *parts))] = path
    return names


MODULES = _module_names()


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that runs, at module level or in a function; not `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def _imports_of(name: str) -> set[str]:
    path = MODULES[name]
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = name.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            targets.add(sub if sub in MODULES else base)
    return {target for target in targets if target in MODULES and target != name}


GRAPH = {name: _imports_of(name) for name in MODULES}


def test_retrieval_never_imports_agent_tui_or_evals():
    upward = {
        (name, target)
        for name, targets in GRAPH.items()
        if name.startswith("codeqa.retrieval")
        for target in targets
        if not target.startswith("codeqa.retrieval")
    }
    assert upward == set()


def test_agent_never_imports_tui_or_evals():
    upward = {
        (name, target)
        for name, targets in GRAPH.items()
        if name.startswith("codeqa.agent")
        for target in targets
        if target.startswith(("codeqa.tui", "codeqa.evals"))
    }
    assert upward == set()


def test_no_module_imports_itself_back_through_others():
    # A package's face (__init__) importing its own submodules is how a room exposes
    # them; a cycle is a module reached again from what it imports.
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(GRAPH[name]):
            if _is_own_face(name, target):
                continue
            if state.get(target) == 1:
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)
    assert cycles == []


def _is_own_face(name: str, target: str) -> bool:
    """`target` is the public face (__init__) of a package that holds `name`."""
    return MODULES[target].name == "__init__.py" and name.startswith(target + ".")
