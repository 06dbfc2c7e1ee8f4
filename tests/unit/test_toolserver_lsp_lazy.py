"""LSP builds no index up front: ripgrep finds the files that mention a name, and ctags
parses only those (at most a cap of them), with the real binaries on a small tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sandbox_runner.sandbox.toolserver.ops import lsp, lsp_index
from sandbox_runner.sandbox.toolserver.processes import ProcessResult, run_process
from sandbox_runner.sandbox.toolserver.server import ToolServer
from tests.conftest import unavailable

DIRECTORIES = 30
FILES_PER_DIRECTORY = 10
GREETER_FILES = ("d05/f03.py", "d07/f01.py", "d20/f09.py")


@pytest.fixture
def server(tmp_path: Path) -> ToolServer:
    """A workspace of 300 Python files; three of them mention Greeter, one defines it."""
    for tool, package in (("rg", "ripgrep"), ("ctags", "universal-ctags")):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed on the host (Debian package {package})")
    workspace = tmp_path / "ws"
    for directory in range(DIRECTORIES):
        for file in range(FILES_PER_DIRECTORY):
            path = workspace / f"d{directory:02d}" / f"f{file:02d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"def value_{directory}_{file}():\n    return {file}\n")
    (workspace / GREETER_FILES[0]).write_text("class Greeter:\n    pass\n")
    for name in GREETER_FILES[1:]:
        (workspace / name).write_text(
            "from d05.f03 import Greeter\n\n\ndef greet():\n    return Greeter()\n"
        )
    (tmp_path / "plan").mkdir()
    tool_server = ToolServer(str(workspace), str(tmp_path / "plan"), [], (1 << 20, 100))
    tool_server.warmed_up.set()
    return tool_server


@pytest.fixture
def indexed(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The files each ctags run was given; each must show in its real output (every file
    of the tree defines something), so the count is of files ctags really parsed."""
    runs: list[set[str]] = []

    def spied(*args: object, **kwargs: object) -> ProcessResult:
        result = run_process(*args, **kwargs)  # type: ignore[arg-type]
        argv = args[1]
        assert isinstance(argv, list)
        if argv[0] == "ctags":
            given = set(argv[len(lsp_index.CTAGS_ARGV) :])
            tags = [json.loads(line) for line in result.stdout.data().splitlines()]
            assert {tag["path"] for tag in tags} == given
            runs.append(given)
        return result

    monkeypatch.setattr(lsp_index, "run_process", spied)
    return runs


def relative(server: ToolServer, paths: set[str]) -> set[str]:
    return {path.removeprefix(server.workspace + "/") for path in paths}


def ask(server: ToolServer, **args: object) -> str:
    return lsp.op_lsp(server, dict(args), 60).output


def test_a_definition_parses_only_the_files_that_mention_the_name(
    server: ToolServer, indexed: list[set[str]]
) -> None:
    answer = ask(server, operation="definition", symbol="Greeter")
    assert answer.splitlines()[:2] == ["1 definition of 'Greeter':", "d05/f03.py:1: class Greeter"]
    assert [relative(server, files) for files in indexed] == [set(GREETER_FILES)]


def test_document_symbols_parse_the_one_file(server: ToolServer, indexed: list[set[str]]) -> None:
    answer = ask(server, operation="document_symbols", file_path="d12/f04.py")
    assert answer == "1: function value_12_4()"
    assert [relative(server, files) for files in indexed] == [{"d12/f04.py"}]


def test_references_parse_only_the_files_shown(server: ToolServer, indexed: list[set[str]]) -> None:
    answer = ask(server, operation="references", symbol="Greeter")
    assert answer.splitlines()[0] == "5 references to 'Greeter' in 3 files:"
    assert [relative(server, files) for files in indexed] == [set(GREETER_FILES)]


def test_when_ripgrep_stops_at_the_cap_the_answer_says_it_is_partial(
    server: ToolServer, indexed: list[set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lsp_index, "LSP_MAX_MENTIONS", 2)
    answer = ask(server, operation="workspace_symbols", symbol="Greeter").splitlines()
    assert answer[-1] == (
        "[parsed 2 of more than 2 files that mention 'Greeter'; "
        "results may be incomplete: use Grep to search further]"
    )
    assert len(indexed) == 1 and len(indexed[0]) <= 2
    references = ask(server, operation="references", symbol="Greeter").splitlines()
    # One file or two, as ripgrep's threads found them first.
    assert references[0].startswith("at least 2 references to 'Greeter' in at least ")


def test_when_ctags_parses_fewer_files_than_mention_the_name_the_answer_says_so(
    server: ToolServer, indexed: list[set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lsp, "LSP_MAX_CANDIDATE_FILES", 1)
    answer = ask(server, operation="definition", symbol="Greeter").splitlines()
    assert answer[-1] == (
        "[parsed 1 of the 3 files that mention 'Greeter'; "
        "results may be incomplete: use Grep to search further]"
    )
    assert [relative(server, files) for files in indexed] == [{"d05/f03.py"}]


def test_a_definition_asked_from_a_file_is_looked_for_in_its_directory_first(
    server: ToolServer, indexed: list[set[str]]
) -> None:
    user = Path(server.workspace, "d12", "f05.py")
    user.write_text("from d12.f04 import value_12_4\n\n\ndef use():\n    return value_12_4()\n")
    answer = ask(server, operation="definition", file_path="d12/f05.py", line=5, character=12)
    assert answer.splitlines() == [
        "1 definition of 'value_12_4':",
        "d12/f04.py:1: function value_12_4",
        "    def value_12_4():",
        "[looked in d12/ only; to search the whole repository, ask with symbol and no file_path]",
    ]
    assert [relative(server, files) for files in indexed] == [{"d12/f04.py", "d12/f05.py"}]


def test_a_definition_not_in_the_files_directory_is_looked_for_above_it(
    server: ToolServer, indexed: list[set[str]]
) -> None:
    answer = ask(server, operation="definition", file_path="d07/f01.py", line=5, character=12)
    assert answer.splitlines() == [
        "1 definition of 'Greeter':",
        "d05/f03.py:1: class Greeter",
        "    class Greeter:",
    ]
    # The file asked from is parsed once, in the first directory; the wider search adds
    # only the other files that mention the name.
    assert [relative(server, files) for files in indexed] == [
        {"d07/f01.py"},
        {"d05/f03.py", "d20/f09.py"},
    ]


def test_a_directory_linked_out_of_the_workspace_is_not_searched(
    server: ToolServer, indexed: list[set[str]], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "asked.py").write_text("def ask():\n    return Greeter()\n")
    (outside / "secret.py").write_text("class Greeter:\n    secret = 1\n")
    Path(server.workspace, "linked").symlink_to(outside)
    answer = ask(server, operation="definition", file_path="linked/asked.py", line=2, character=12)
    assert answer.splitlines()[:2] == ["1 definition of 'Greeter':", "d05/f03.py:1: class Greeter"]
    parsed = set().union(*indexed)
    assert f"{outside}/secret.py" not in parsed
    assert relative(server, parsed) == {"linked/asked.py", *GREETER_FILES}
