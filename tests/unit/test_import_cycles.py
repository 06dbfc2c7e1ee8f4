"""No module of the package imports itself back, through any chain of imports.

Every import that can run counts: at module level, and deferred in a function too (a
deferred import that closes a circle only hides it until the day someone moves it up).
Imports under `if TYPE_CHECKING:` never run and do not count. Neither does the package a
module sits in: Python runs a package's `__init__` before any of its modules, so a
package that re-exports its modules (`sandbox_runner.batch`) closes no circle. A module
imported by a string (`importlib.import_module`, as the CLI's LazyGroup does) is not seen.

A failing test names one circle, each import with its file and line.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sandbox_runner"


def module_paths() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts).removesuffix(".__init__")] = path
    return found


def runs_only_when_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_statements(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that can run, at any depth under nodes."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and runs_only_when_type_checking(node.test):
            yield from import_statements(node.orelse)
        else:
            yield from import_statements(ast.iter_child_nodes(node))


def imported_modules(
    module: str, path: Path, statement: ast.Import | ast.ImportFrom, known: set[str]
) -> set[str]:
    """The modules of the package a statement imports (a name imported from a module is
    that module; a module imported from a package is that module)."""
    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    else:
        base = statement.module or ""
        if statement.level:
            anchor = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            anchor = anchor[: len(anchor) - statement.level + 1]
            base = ".".join([*anchor, *filter(None, [statement.module])])
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in statement.names
        ]
    return {name for name in names if name in known and name != module}


def import_graph() -> dict[str, dict[str, str]]:
    """For each module, the modules it imports, each with where (`file:line`)."""
    paths = module_paths()
    known = set(paths)
    graph: dict[str, dict[str, str]] = {}
    for module, path in paths.items():
        edges: dict[str, str] = {}
        for statement in import_statements([ast.parse(path.read_text(), str(path))]):
            for target in imported_modules(module, path, statement, known):
                where = f"{path.relative_to(PACKAGE.parent)}:{statement.lineno}"
                edges.setdefault(target, where)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str]:
    """One circle of imports (its modules, the first repeated at the end), or []."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        for target in sorted(graph[module]):
            if cycle := visit(target, [*path, module]):
                return cycle
        done.add(module)
        return []

    for module in sorted(graph):
        if cycle := visit(module, []):
            return cycle
    return []


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    steps = [
        f"{module} -> {target} ({graph[module][target]})"
        for module, target in itertools.pairwise(cycle)
    ]
    assert not cycle, "an import cycle:\n" + "\n".join(steps)


def test_the_check_sees_deferred_imports_and_skips_type_checking_ones() -> None:
    """The test above cannot fail silently: the graph holds a known deferred import and
    leaves out an import made only for the type checker."""
    graph = import_graph()
    # sandbox_runner/cli/app.py imports session_cmd inside the root command's body.
    assert "sandbox_runner.cli.session_cmd" in graph["sandbox_runner.cli.app"]
    # session/sandboxes.py imports the sandbox factory only under TYPE_CHECKING.
    assert "sandbox_runner.sandbox.factory" not in graph["sandbox_runner.session.sandboxes"]
    assert find_cycle({"a": {"b": "a.py:1"}, "b": {"a": "b.py:2"}}) == ["a", "b", "a"]
