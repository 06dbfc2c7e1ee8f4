"""The tool server's lsp op (universal-ctags plus ripgrep), asked through the host client."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import TOOLSERVER_MOUNT, SandboxSpec
from sandbox_runner.types import ExecResult, ToolRequest

OpenSandbox = Callable[[Path], DockerSandbox]

SOURCES = {
    "pkg/models.py": '''\
"""Greeting models."""


class Greeter:
    """Says hello."""

    def __init__(self, name: str) -> None:
        self.name = name

    def greet(self, loud: bool = False) -> str:
        text = f"Hello, {self.name}"
        return text.upper() if loud else text


def helper() -> int:
    return 1
''',
    "pkg/app.py": """\
from pkg.models import Greeter


def helper() -> int:
    return 2


def main() -> str:
    greeter = Greeter("world")
    return greeter.greet(loud=True) + str(helper())
""",
    "web/shapes.ts": """\
export interface Shape {
  area(): number;
}

export class Circle implements Shape {
  constructor(private radius: number) {}
  area(): number {
    return Math.PI * this.radius * this.radius;
  }
}

export function makeCircle(radius: number): Circle {
  return new Circle(radius);
}
""",
    "web/widget.js": """\
// Greeter is only a word here: this file is JavaScript, not Python.
class Widget {
  render($el) {
    return $el.append("Greeter");
  }
}

function mount(widget) {
  return widget.render(null);
}
""",
    "go/shapes.go": """\
package shapes

type Square struct {
\tSide float64
}

func (s Square) Area() float64 {
\treturn s.Side * s.Side
}

func NewSquare(side float64) Square {
\treturn Square{Side: side}
}

func Total(squares []Square) float64 {
\ttotal := 0.0
\tfor _, square := range squares {
\t\ttotal += square.Area()
\t}
\treturn total
}
""",
    "rust/counter.rs": """\
pub struct Counter {
    count: u32,
}

impl Counter {
    pub fn new() -> Self {
        Counter { count: 0 }
    }

    pub fn tick(&mut self) -> u32 {
        self.count += 1;
        self.count
    }
}

pub fn run() -> u32 {
    let mut counter = Counter::new();
    counter.tick()
}
""",
    "java/Account.java": """\
package bank;

public class Account {
    private int balance;

    public Account(int start) {
        this.balance = start;
    }

    public int deposit(int amount) {
        balance += amount;
        return balance;
    }
}
""",
    "c/point.h": """\
#ifndef POINT_H
#define POINT_H

struct point {
    int x;
    int y;
};

int add_points(struct point a, struct point b);

#endif
""",
    "c/point.c": """\
#include "point.h"

int add_points(struct point a, struct point b) {
    return a.x + b.x + a.y + b.y;
}

int twice(struct point a) {
    return add_points(a, a);
}
""",
    "notes.txt": "Greeter is mentioned in prose.\n",
}

OUTLINES = {
    "pkg/models.py": [
        "4: class Greeter",
        "  7: member __init__(self, name: str)",
        "  10: member greet(self, loud: bool = False)",
        "15: function helper()",
    ],
    "web/shapes.ts": [
        "1: interface Shape",
        "  2: method area",
        "5: class Circle",
        "  6: method constructor",
        "  6: property radius",
        "  7: method area",
        "12: function makeCircle",
    ],
    "web/widget.js": ["2: class Widget", "  3: method render($el)", "8: function mount(widget)"],
    "go/shapes.go": [
        "1: package shapes",
        "  3: struct Square",
        "    4: member Side",
        "    7: func Area()",
        "  11: func NewSquare(side float64)",
        "  15: func Total(squares []Square)",
    ],
    "rust/counter.rs": [
        "1: struct Counter",
        "  2: field count",
        "5: implementation Counter",
        "  6: method new() -> Self",
        "  10: method tick(&mut self) -> u32",
        "16: function run() -> u32",
    ],
    "java/Account.java": [
        "1: package bank",
        "3: class Account",
        "  4: field balance",
        "  6: method Account(int start)",
        "  10: method deposit(int amount)",
    ],
    "c/point.h": [
        "2: macro POINT_H",
        "4: struct point",
        "  5: member x",
        "  6: member y",
        "9: prototype add_points(struct point a,struct point b)",
    ],
    "c/point.c": [
        "3: function add_points(struct point a,struct point b)",
        "7: function twice(struct point a)",
    ],
}


def write_sources(root: Path) -> None:
    for relative, text in SOURCES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lsp") / "ws"
    write_sources(root)
    return root


def sandbox_on(workspace: Path, image: str, docker_client: Any) -> DockerSandbox:
    """A real plan sandbox on WORKSPACE, with a plan directory of its own beside it."""
    plan_dir = workspace.parent / f"plan-{uuid.uuid4().hex[:8]}"
    plan_dir.mkdir()
    spec = SandboxSpec.plan(workspace, plan_dir, image, session="test-lsp", agent="test")
    return DockerSandbox(spec, docker_client)


@pytest.fixture(scope="module")
def sandbox(workspace: Path, sandbox_image: str, docker_client: Any) -> Iterator[DockerSandbox]:
    with sandbox_on(workspace, sandbox_image, docker_client) as started:
        yield started


@pytest.fixture
def open_sandbox(sandbox_image: str, docker_client: Any) -> OpenSandbox:
    """Sandboxes on a test's own workspace (use in a `with`: the container is removed)."""
    return lambda workspace: sandbox_on(workspace, sandbox_image, docker_client)


def lsp(sandbox: DockerSandbox, timeout: float | None = None, **args: Any) -> ExecResult:
    return sandbox.call(ToolRequest("lsp", args, timeout=timeout))


def answer(sandbox: DockerSandbox, **args: Any) -> list[str]:
    result = lsp(sandbox, **args)
    assert result.ok, result.error
    return result.output.splitlines()


def refusal(sandbox: DockerSandbox, **args: Any) -> str:
    result = lsp(sandbox, **args)
    assert not result.ok, result.output
    assert result.error and "\n" not in result.error
    return result.error


# ------------------------------------------------------------ document_symbols


@pytest.mark.parametrize("file_path", sorted(OUTLINES))
def test_document_symbols_outlines_each_language(sandbox: DockerSandbox, file_path: str) -> None:
    assert answer(sandbox, operation="document_symbols", file_path=file_path) == OUTLINES[file_path]


def test_document_symbols_accepts_an_absolute_path(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="document_symbols", file_path="/workspace/c/point.c")
    assert lines == OUTLINES["c/point.c"]


def test_document_symbols_says_when_nothing_is_recognised(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="document_symbols", file_path="notes.txt")
    assert lines == ["No symbols found in notes.txt (language not recognised?)"]


# ------------------------------------------------------------ workspace_symbols


def test_workspace_symbols_lists_exact_matches_before_substrings(sandbox: DockerSandbox) -> None:
    assert answer(sandbox, operation="workspace_symbols", symbol="greet") == [
        "pkg/models.py:10: member greet (class Greeter)",
        "pkg/models.py:4: class Greeter",
    ]


def test_workspace_symbols_substring_search_ignores_case(sandbox: DockerSandbox) -> None:
    assert answer(sandbox, operation="workspace_symbols", symbol="AREA") == [
        "go/shapes.go:7: func Area (struct shapes.Square)",
        "web/shapes.ts:2: method area (interface Shape)",
        "web/shapes.ts:7: method area (class Circle)",
    ]


@pytest.mark.parametrize(
    ("symbol", "expected"),
    [
        ("Square", "go/shapes.go:3: struct Square (package shapes)"),
        ("Counter", "rust/counter.rs:1: struct Counter"),
        ("deposit", "java/Account.java:10: method deposit (class Account)"),
        ("add_points", "c/point.c:3: function add_points"),
        ("makeCircle", "web/shapes.ts:12: function makeCircle"),
    ],
)
def test_workspace_symbols_finds_definitions_in_each_language(
    sandbox: DockerSandbox, symbol: str, expected: str
) -> None:
    assert expected in answer(sandbox, operation="workspace_symbols", symbol=symbol)


def test_workspace_symbols_narrows_by_qualifier(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="workspace_symbols", symbol="Counter::tick")
    assert lines == ["rust/counter.rs:10: method tick (implementation Counter)"]
    lines = answer(sandbox, operation="workspace_symbols", symbol="Circle.area")
    assert lines == ["web/shapes.ts:7: method area (class Circle)"]


def test_workspace_symbols_reports_no_match(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="workspace_symbols", symbol="Frobnicator")
    assert lines == ["No symbols matching 'Frobnicator' found in the workspace"]


def test_workspace_symbols_caps_the_list(tmp_path: Path, open_sandbox: OpenSandbox) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "many.py").write_text("".join(f"def item_{n:03}():\n    pass\n" for n in range(150)))
    with open_sandbox(root) as sandbox:
        result = lsp(sandbox, operation="workspace_symbols", symbol="item")
    lines = result.output.splitlines()
    assert lines[0] == "many.py:1: function item_000"
    assert len(lines) == 101 and result.truncated
    assert lines[-1] == "[showing 100 of 150 symbols; use a more specific name]"


# ------------------------------------------------------------ definition


def test_definition_from_a_python_call_site_finds_the_class_in_another_file(
    sandbox: DockerSandbox,
) -> None:
    lines = answer(sandbox, operation="definition", file_path="pkg/app.py", line=9, character=17)
    assert lines == [
        "1 definition of 'Greeter':",
        "pkg/models.py:4: class Greeter",
        "    class Greeter:",
        looked_in("pkg"),
    ]


def test_definition_of_a_python_method(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="definition", file_path="pkg/app.py", line=10, character=20)
    assert lines[1:] == [
        "pkg/models.py:10: member greet (class Greeter)",
        "    def greet(self, loud: bool = False) -> str:",
        looked_in("pkg"),
    ]


def test_definition_prefers_the_same_file(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="definition", file_path="pkg/app.py", line=10, character=44)
    assert lines == [
        "2 definitions of 'helper':",
        "pkg/app.py:4: function helper",
        "    def helper() -> int:",
        "pkg/models.py:15: function helper",
        "    def helper() -> int:",
        looked_in("pkg"),
    ]
    from_models = answer(
        sandbox, operation="definition", file_path="pkg/models.py", symbol="helper"
    )
    assert from_models[1] == "pkg/models.py:15: function helper"


def test_definition_in_go_rust_and_c(sandbox: DockerSandbox) -> None:
    go = answer(sandbox, operation="definition", file_path="go/shapes.go", line=18, character=20)
    assert go[1:] == [
        "go/shapes.go:7: func Area (struct shapes.Square)",
        "    func (s Square) Area() float64 {",
        looked_in("go"),
    ]
    rust = answer(
        sandbox, operation="definition", file_path="rust/counter.rs", line=17, character=33
    )
    assert rust[1:] == [
        "rust/counter.rs:6: method new (implementation Counter)",
        "    pub fn new() -> Self {",
        looked_in("rust"),
    ]
    c = answer(sandbox, operation="definition", file_path="c/point.c", line=8, character=12)
    assert c == [
        "2 definitions of 'add_points':",
        "c/point.c:3: function add_points",
        "    int add_points(struct point a, struct point b) {",
        "c/point.h:9: prototype add_points",
        "    int add_points(struct point a, struct point b);",
        looked_in("c"),
    ]


def looked_in(directory: str) -> str:
    """The note of a definition found in the directory of the file asked from."""
    whole = "to search the whole repository, ask with symbol and no file_path"
    return f"[looked in {directory}/ only; {whole}]"


def test_a_definition_elsewhere_is_found_by_widening_the_search(
    tmp_path: Path, open_sandbox: OpenSandbox
) -> None:
    root = tmp_path / "ws"
    (root / "lib" / "geometry").mkdir(parents=True)
    (root / "app").mkdir()
    (root / "lib" / "geometry" / "square.py").write_text("class Square:\n    pass\n")
    (root / "app" / "main.py").write_text("from lib.geometry.square import Square\n\nSquare()\n")
    with open_sandbox(root) as sandbox:
        lines = answer(
            sandbox, operation="definition", file_path="app/main.py", line=3, character=1
        )
    assert lines == [
        "1 definition of 'Square':",
        "lib/geometry/square.py:1: class Square",
        "    class Square:",
    ]


def test_definition_by_symbol_alone(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="definition", symbol="Account")
    assert lines[0] == "2 definitions of 'Account':"
    assert "java/Account.java:3: class Account" in lines
    assert "java/Account.java:6: method Account (class Account)" in lines


def test_definition_not_found_is_an_answer(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="definition", file_path="pkg/app.py", line=9, character=5)
    assert lines[0].startswith("No definition found for 'greeter' in ")


# ------------------------------------------------------------ identifier


@pytest.mark.parametrize(
    ("character", "name"),
    [
        (15, "Greeter"),
        (18, "Greeter"),
        (21, "Greeter"),
        (22, "Greeter"),
        (5, "greeter"),
        (12, "greeter"),
    ],
)
def test_identifier_under_the_cursor_or_just_before_it(
    sandbox: DockerSandbox, character: int, name: str
) -> None:
    # Line 9 of pkg/app.py is `    greeter = Greeter("world")`.
    result = lsp(
        sandbox, operation="definition", file_path="pkg/app.py", line=9, character=character
    )
    assert result.ok and f"'{name}'" in result.output.splitlines()[0]


def test_identifier_may_contain_a_dollar_sign(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="references", file_path="web/widget.js", line=4, character=13)
    assert lines[0] == "2 references to '$el' in 1 file (JavaScript/TypeScript files):"


@pytest.mark.parametrize(
    ("line", "character", "message"),
    [
        (9, 13, "No identifier at pkg/app.py:9:13"),
        (2, 1, "No identifier at pkg/app.py:2:1"),
        (5, 12, "No identifier at pkg/app.py:5:12"),  # the 2 of `return 2`
        (99, 1, "Line 99 is out of range: pkg/app.py has 10 lines"),
        (9, 40, "Character 40 is out of range: line 9 of pkg/app.py has 30 characters"),
    ],
)
def test_position_errors(sandbox: DockerSandbox, line: int, character: int, message: str) -> None:
    error = refusal(
        sandbox, operation="definition", file_path="pkg/app.py", line=line, character=character
    )
    assert error.startswith(message)


# ------------------------------------------------------------ references


def test_references_in_python_mark_definitions_and_stay_in_the_language(
    sandbox: DockerSandbox,
) -> None:
    lines = answer(sandbox, operation="references", file_path="pkg/app.py", line=1, character=25)
    assert lines == [
        "3 references to 'Greeter' in 2 files (Python files):",
        "pkg/app.py:1: from pkg.models import Greeter",
        'pkg/app.py:9: greeter = Greeter("world")',
        "pkg/models.py:4: class Greeter: (definition)",
    ]


def test_references_by_symbol_without_a_file_search_everything(sandbox: DockerSandbox) -> None:
    lines = answer(sandbox, operation="references", symbol="Greeter")
    assert lines[0] == "6 references to 'Greeter' in 4 files:"
    assert "notes.txt:1: Greeter is mentioned in prose." in lines
    assert 'web/widget.js:4: return $el.append("Greeter");' in lines


def test_references_in_go_and_c(sandbox: DockerSandbox) -> None:
    go = answer(sandbox, operation="references", file_path="go/shapes.go", line=3, character=7)
    assert go == [
        "5 references to 'Square' in 1 file (Go files):",
        "go/shapes.go:3: type Square struct { (definition)",
        "go/shapes.go:7: func (s Square) Area() float64 {",
        "go/shapes.go:11: func NewSquare(side float64) Square {",
        "go/shapes.go:12: return Square{Side: side}",
        "go/shapes.go:15: func Total(squares []Square) float64 {",
    ]
    c = answer(sandbox, operation="references", file_path="c/point.h", symbol="add_points")
    assert c == [
        "3 references to 'add_points' in 2 files (C/C++ files):",
        "c/point.c:3: int add_points(struct point a, struct point b) { (definition)",
        "c/point.c:8: return add_points(a, a);",
        "c/point.h:9: int add_points(struct point a, struct point b); (definition)",
    ]


def test_references_are_capped_with_a_total(tmp_path: Path, open_sandbox: OpenSandbox) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "lib.py").write_text("def target():\n    pass\n")
    (root / "uses.py").write_text("".join(f"x{n} = target()\n" for n in range(250)))
    with open_sandbox(root) as sandbox:
        result = lsp(sandbox, operation="references", file_path="lib.py", line=1, character=5)
    lines = result.output.splitlines()
    assert lines[0] == "251 references to 'target' in 2 files (Python files):"
    assert lines[1] == "lib.py:1: def target(): (definition)"
    assert len(lines) == 202 and result.truncated
    assert lines[-1].startswith("[showing the first 200 of 251 references")


# ------------------------------------------------------------ errors and safety


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "Missing or invalid argument 'operation'"),
        ({"operation": "hover"}, "Invalid operation 'hover': expected one of document_symbols"),
        ({"operation": "document_symbols"}, "Missing or invalid argument 'file_path'"),
        ({"operation": "workspace_symbols"}, "workspace_symbols needs symbol"),
        ({"operation": "workspace_symbols", "symbol": "two words"}, "Invalid symbol 'two words'"),
        ({"operation": "definition"}, "definition needs file_path, line and character"),
        ({"operation": "references", "file_path": "pkg/app.py", "line": 3}, "references needs"),
        (
            {"operation": "references", "file_path": "pkg/app.py", "line": 0, "character": 1},
            "'line'",
        ),
        ({"operation": "document_symbols", "file_path": "missing.py"}, "File does not exist"),
        ({"operation": "document_symbols", "file_path": "pkg"}, "Path is a directory"),
    ],
)
def test_argument_errors(sandbox: DockerSandbox, args: dict[str, Any], message: str) -> None:
    assert message in refusal(sandbox, **args)


def test_a_fifo_is_refused_without_hanging(tmp_path: Path, open_sandbox: OpenSandbox) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    os.mkfifo(root / "pipe.py")
    with open_sandbox(root) as sandbox:
        error = refusal(sandbox, operation="document_symbols", file_path="pipe.py")
    assert error.startswith("Not a regular file (fifo)")


def test_symlinks_out_of_the_workspace_are_refused(
    tmp_path: Path, open_sandbox: OpenSandbox
) -> None:
    root = tmp_path / "ws"
    write_sources(root)
    # A Python file that exists inside the container, outside the workspace.
    (root / "escape.py").symlink_to(f"{TOOLSERVER_MOUNT}/ops/read.py")
    (root / "alias.py").symlink_to(Path("pkg") / "models.py")
    with open_sandbox(root) as sandbox:
        error = refusal(sandbox, operation="document_symbols", file_path="escape.py")
        inside = answer(sandbox, operation="document_symbols", file_path="alias.py")
        found = answer(sandbox, operation="workspace_symbols", symbol="op_read")
    assert error.startswith("Refusing to follow a symbolic link out of the workspace")
    assert inside == OUTLINES["pkg/models.py"]
    assert found == ["No symbols matching 'op_read' found in the workspace"]


def test_no_tags_file_is_written(tmp_path: Path, open_sandbox: OpenSandbox) -> None:
    root = tmp_path / "ws"
    write_sources(root)
    before = sorted(path.relative_to(root) for path in root.rglob("*"))
    with open_sandbox(root) as sandbox:
        for file_path in OUTLINES:
            answer(sandbox, operation="document_symbols", file_path=file_path)
        answer(sandbox, operation="workspace_symbols", symbol="point")
        answer(sandbox, operation="definition", symbol="Greeter")
        answer(sandbox, operation="references", file_path="pkg/app.py", symbol="helper")
        plan_dir = sandbox.spec.plan_dir
    assert sorted(path.relative_to(root) for path in root.rglob("*")) == before
    assert plan_dir is not None and list(plan_dir.iterdir()) == []


def test_the_request_timeout_stops_ctags(tmp_path: Path, open_sandbox: OpenSandbox) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    big = "".join(f"def function_{n}(a, b):\n    return a\n" for n in range(300_000))
    (root / "big.py").write_text(big)
    with open_sandbox(root) as sandbox:
        result = lsp(sandbox, timeout=0.3, operation="document_symbols", file_path="big.py")
    assert not result.ok and result.timed_out
    assert result.error == (
        "lsp timed out after 0.3 s; in a large repository, "
        "use Grep with path= or glob= to look in one part of it"
    )
