"""The architecture, enforced: every import goes down the layers (or stays in its package).

    types, errors, paths, config (and the other base modules)
      <- tools, model, sandbox, plans
      <- agents, mcp <- runs <- batch, verify <- session <- cli

A failing test names the offending import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sandbox_runner"
BASE = {"types", "errors", "paths", "config", "config_values", "config_trust", "catalog", "limits"}
BASE |= {"config_settings"}
BASE |= {"safe_io", "safe_text", "input_depth", "protected", "redact", "git_config"}
BASE |= {"git_ignore", "git_index", "git_private", "secret_names", "tree_walk"}
BASE |= {"web_grant", "spend"}
BASE |= {"__init__"}
RANKS = {"tools": 1, "model": 1, "sandbox": 1, "plans": 1, "images": 1}
RANKS |= {"agents": 2, "mcp": 2, "runs": 3, "batch": 4, "verify": 4}
RANKS |= {"session": 5, "cli": 6, "__main__": 7}
# The tool server runs inside the container, alone: no module of its package may import
# anything of planrun (its relative imports stay inside it: test_toolserver_package.py).
STANDALONE = "sandbox_runner.sandbox.toolserver"


def unit_of(module: str) -> str:
    """The layer unit of a dotted module name: a subpackage, or a base module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank(unit: str) -> int:
    if unit in BASE:
        return 0
    return RANKS[unit]


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(relative.parts)
        found.append((name.removesuffix(".__init__"), path))
    return found


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every `sandbox_runner...` module imported, at any depth (deferred imports too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(node.lineno, name) for name in names if name.startswith("sandbox_runner")]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name)
                for alias in node.names
                if alias.name.startswith("sandbox_runner")
            ]
    return found


def known_unit(name: str) -> str | None:
    """The unit of an imported name, if it names a module or package of planrun."""
    parts = name.split(".")
    for length in range(len(parts), 1, -1):
        candidate = PACKAGE.parent.joinpath(*parts[:length])
        if candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists():
            return unit_of(".".join(parts[:length]))
    return "__init__" if name == "sandbox_runner" or len(parts) == 2 else None


@pytest.mark.parametrize(("module", "path"), modules(), ids=[name for name, _ in modules()])
def test_imports_go_down_the_layers(module: str, path: Path) -> None:
    unit = unit_of(module)
    wrong = []
    for line, imported in imports_of(path):
        target = known_unit(imported)
        if target is None:
            continue
        if module == STANDALONE or module.startswith(STANDALONE + "."):
            wrong.append(f"{path.name}:{line} imports {imported} (the tool server is standalone)")
        elif (
            target != unit and rank(target) >= rank(unit) and not (rank(unit) == 0 == rank(target))
        ):
            wrong.append(
                f"{path.relative_to(PACKAGE.parent)}:{line} imports {imported}: "
                f"{unit} (layer {rank(unit)}) may not import {target} (layer {rank(target)})"
            )
    assert not wrong, "\n".join(wrong)


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    modules_here = {p.stem for p in PACKAGE.glob("*.py")}
    assert packages <= set(RANKS), packages - set(RANKS)
    assert modules_here <= BASE | {"__main__"}, modules_here - BASE - {"__main__"}


def test_every_package_ships() -> None:
    """A subpackage missing from pyproject's list works in the editable checkout and is
    absent from the wheel users install."""
    import tomllib

    listed = set(
        tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"][
            "packages"
        ]
    )
    found = {
        ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        for path in PACKAGE.rglob("__init__.py")
    }
    assert found <= listed, sorted(found - listed)


@pytest.mark.parametrize(
    ("sdk", "home"), [("anthropic", "sandbox_runner.model"), ("docker", "sandbox_runner.sandbox")]
)
def test_each_sdk_is_imported_by_its_own_package_only(sdk: str, home: str) -> None:
    """The model and the sandbox are the two seams: the rest of planrun gets our own types."""
    wrong = []
    for module, path in modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.split(".")[0] == sdk for name in names) and not (
                module == home or module.startswith(home + ".")
            ):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not wrong, f"{sdk} imported outside {home}: {wrong}"
