"""The diffs an approval and an edit show: real line numbers against the file as it is,
new and deleted files, CRLF, a missing last newline, colour, and the collapse."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from sandbox_runner import SandboxBase
from sandbox_runner.session.diff_view import after_edit, ansi_lines, use_colour
from sandbox_runner.session.diffs import build_diff, edit_preview
from sandbox_runner.session.edit_watch import EditWatch
from sandbox_runner.types import ExecResult, ToolRequest


def texts(diff: object) -> list[str]:
    return [line.text for line in diff.lines]  # type: ignore[attr-defined]


def test_a_change_on_line_2_has_its_hunk_header_and_three_lines_of_context() -> None:
    old = "".join(f"line {n}\n" for n in range(1, 11))
    diff = build_diff("src/app.js", old, old.replace("line 2\n", "line two\n"))
    assert texts(diff) == [
        "--- a/src/app.js",
        "+++ b/src/app.js",
        "@@ -1,5 +1,5 @@",
        " line 1",
        "-line 2",
        "+line two",
        " line 3",
        " line 4",
        " line 5",
    ]
    assert (diff.added, diff.removed) == (1, 1)


def test_an_edit_is_located_in_the_file_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text("const a = 1;\nconst b = 2;\nconst c = 3;\n")
    edit = {"file_path": "/workspace/index.js", "old_string": "b = 2", "new_string": "b = 20"}
    diff = edit_preview(tmp_path, ToolRequest("edit", edit))
    assert not isinstance(diff, str)
    assert texts(diff)[:3] == ["--- a/index.js", "+++ b/index.js", "@@ -1,3 +1,3 @@"]
    assert "-const b = 2;" in texts(diff) and "+const b = 20;" in texts(diff)


def test_an_edit_that_will_fail_says_why(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\nx = 1\n")
    edit = {"file_path": "/workspace/a.py", "old_string": "x = 1", "new_string": "x = 2"}
    assert "2 times" in str(edit_preview(tmp_path, ToolRequest("edit", edit)))
    edit["old_string"] = "y"
    assert "not in the file" in str(edit_preview(tmp_path, ToolRequest("edit", edit)))


def test_a_write_of_a_new_file_is_against_dev_null(tmp_path: Path) -> None:
    write = {"file_path": "/workspace/new/file.txt", "content": "one\ntwo\n"}
    diff = edit_preview(tmp_path, ToolRequest("write", write))
    assert not isinstance(diff, str) and diff.created
    assert texts(diff) == ["--- /dev/null", "+++ b/new/file.txt", "@@ -0,0 +1,2 @@", "+one", "+two"]


def test_a_deletion_is_against_dev_null() -> None:
    diff = build_diff("gone.txt", "a\nb\n", None)
    assert texts(diff) == ["--- a/gone.txt", "+++ /dev/null", "@@ -1,2 +0,0 @@", "-a", "-b"]
    assert diff.deleted and diff.summary() == "gone.txt: deleted, 0 lines added, 2 removed"


def test_crlf_throughout_is_not_shown_but_a_changed_line_end_is() -> None:
    crlf = build_diff("w.bat", "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n")
    assert texts(crlf)[2:] == ["@@ -1,3 +1,3 @@", " a", "-b", "+B", " c"]
    mixed = build_diff("w.bat", "a\r\nb\r\n", "a\nb\r\n")
    assert "-a\r" in texts(mixed) and "+a" in texts(mixed)
    [shown] = [line for line in ansi_lines(mixed.lines, False) if line.startswith("-a")]
    assert shown == "-a␍"


def test_no_newline_at_the_end_is_said() -> None:
    diff = build_diff("n.txt", "a\nb", "a\nc")
    assert texts(diff)[2:] == [
        "@@ -1,2 +1,2 @@",
        " a",
        "-b",
        "\\ No newline at end of file",
        "+c",
        "\\ No newline at end of file",
    ]


def test_a_large_diff_after_an_edit_is_collapsed_with_a_way_to_see_it_all() -> None:
    diff = build_diff("big.txt", None, "".join(f"{n}\n" for n in range(50)))
    shown = after_edit(diff)
    assert shown[0].text == "  ⎿ big.txt: new file, 50 lines added, 0 removed"
    assert len(shown) == 1 + 20 + 1
    assert shown[-1].text == "… 31 more lines (/diff big.txt shows all of it)"
    assert len(after_edit(diff, whole=True)) == 1 + 51


def test_colour_on_a_terminal_and_never_with_no_color_or_in_a_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    diff = build_diff("a", "x\n", "y\n")
    coloured = ansi_lines(diff.lines, True)
    assert coloured[2] == "\x1b[36m@@ -1 +1 @@\x1b[0m"
    assert coloured[3] == "\x1b[31m-x\x1b[0m" and coloured[4] == "\x1b[32m+y\x1b[0m"
    assert "\x1b" not in "".join(ansi_lines(diff.lines, False))
    read, write = os.openpty()
    with os.fdopen(write, "w") as tty:
        monkeypatch.delenv("NO_COLOR", raising=False)
        assert use_colour(tty) and not use_colour(io.StringIO())
        monkeypatch.setenv("NO_COLOR", "1")
        assert not use_colour(tty)
    os.close(read)


def test_an_escape_in_the_file_is_shown_not_run() -> None:
    diff = build_diff("a", "x\n", "\x1b[2Jy\n")
    assert ansi_lines(diff.lines, False)[-1] == "+␛[2Jy"


class Writer(SandboxBase):
    """A sandbox that writes the file the way the tool server would."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def start(self) -> None:
        """Nothing to start: the files are the directory's."""

    def stop(self) -> None:
        """Nothing to stop."""

    def call(self, request: ToolRequest) -> ExecResult:
        path = self.root / str(request.args["file_path"]).removeprefix("/workspace/")
        text = path.read_text()
        path.write_text(text.replace(str(request.args["old_string"]), "20", 1))
        return ExecResult(True, "edited")


def test_each_edit_made_is_told_with_its_diff(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1\n2\n3\n")
    told = []
    watch = EditWatch(Writer(tmp_path), tmp_path, lambda diff, request: told.append(diff))
    edit = {"file_path": "/workspace/a.txt", "old_string": "2", "new_string": "20"}
    assert watch.call(ToolRequest("edit", edit)).ok
    [diff] = told
    assert texts(diff)[2:] == ["@@ -1,3 +1,3 @@", " 1", "-2", "+20", " 3"]
