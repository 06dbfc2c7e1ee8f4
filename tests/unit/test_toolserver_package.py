"""The tool server is a package that runs alone inside the sandbox: it imports only the
standard library and itself, and starts as a directory, wherever that directory is."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_runner.sandbox.container_options import TOOLSERVER_SOURCE

PACKAGE = "sandbox_runner.sandbox.toolserver"


def package_modules() -> list[tuple[str, Path]]:
    """(dotted name, path) of every module of the package."""
    found = []
    for path in sorted(TOOLSERVER_SOURCE.rglob("*.py")):
        parts = path.relative_to(TOOLSERVER_SOURCE).with_suffix("").parts
        name = ".".join((PACKAGE, *parts)).removesuffix(".__init__")
        found.append((name, path))
    return found


def exists_in_package(dotted: str) -> bool:
    relative = dotted.removeprefix(PACKAGE).lstrip(".").split(".") if dotted != PACKAGE else []
    target = TOOLSERVER_SOURCE.joinpath(*relative)
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def foreign_imports(name: str, path: Path) -> list[str]:
    """Every import of MODULE that is neither the standard library nor the package itself."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wrong = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported = [node.module or ""]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
            inside = target == PACKAGE or target.startswith(PACKAGE + ".")
            if not inside or not (
                exists_in_package(target)
                or any(exists_in_package(f"{target}.{alias.name}") for alias in node.names)
                or exists_in_package(target.rpartition(".")[0])
            ):
                wrong.append(f"{path.name}:{node.lineno} imports {'.' * node.level}{node.module}")
            continue
        else:
            continue
        for module in imported:
            if module.partition(".")[0] not in sys.stdlib_module_names:
                wrong.append(f"{path.name}:{node.lineno} imports {module}")
    return wrong


@pytest.mark.parametrize(
    ("name", "path"), package_modules(), ids=[name for name, _ in package_modules()]
)
def test_a_module_imports_only_the_standard_library_and_the_package(name: str, path: Path) -> None:
    assert foreign_imports(name, path) == []


def test_no_top_level_module_shadows_the_standard_library() -> None:
    """Started as a directory, the package's directory is first on sys.path while Python
    imports runpy and what runpy needs: a `types.py` there would replace the real one."""
    names = {path.stem for path in TOOLSERVER_SOURCE.glob("*.py")}
    names |= {path.parent.name for path in TOOLSERVER_SOURCE.glob("*/__init__.py")}
    assert sorted(names & set(sys.stdlib_module_names)) == []


def test_the_package_starts_as_a_directory_on_its_own(tmp_path: Path) -> None:
    """A copy of the directory alone answers a request: it needs nothing beside it."""
    copy = tmp_path / "mounted" / "toolserver"
    shutil.copytree(TOOLSERVER_SOURCE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    workspace, plan_dir = tmp_path / "ws", tmp_path / "plan"
    workspace.mkdir()
    plan_dir.mkdir()
    request = json.dumps({"id": 1, "op": "ping", "args": {}}) + "\n"
    argv = [sys.executable, "-I", "-S", "-B", "-W", "error", str(copy)]
    argv += ["--workspace", str(workspace), "--plan-dir", str(plan_dir)]
    done = subprocess.run(argv, input=request, capture_output=True, text=True, timeout=30)
    ready, reply = (json.loads(line) for line in done.stdout.splitlines())
    assert ready["event"] == "ready", done.stderr
    assert (reply["id"], reply["ok"], reply["output"]) == (1, True, "pong")
    assert done.stderr == ""
