"""No import cycle among the modules of app/storage, counting every import a module makes:
at the top, inside a function, or under `TYPE_CHECKING` (a cycle hidden there is still a
cycle: the two modules cannot be read, tested or moved one without the other)."""

from __future__ import annotations

import ast
from pathlib import Path

STORAGE = Path(__file__).resolve().parents[2] / "app" / "storage"


def module_name(path: Path) -> str:
    parts = path.relative_to(STORAGE.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, known: set[str]) -> set[str]:
    """The app/storage modules `path` imports anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from package import module` imports the module too.
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(name for name in names if name in known)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                found.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_no_import_cycle_in_storage() -> None:
    files = {module_name(p): p for p in STORAGE.rglob("*.py")}
    graph = {name: imports(path, set(files)) - {name} for name, path in files.items()}
    assert "app.storage.namespace_cache" in graph["app.storage.repository"]  # edges are seen
    assert cycles(graph) == []


def test_the_check_sees_a_hidden_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
