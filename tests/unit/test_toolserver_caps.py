"""Glob, LS and Grep on trees larger than their caps: they stop early and say how to narrow.

The ops run in-process on small trees with their caps lowered, so a test shows what a
million-file repository would do without making one.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.sandbox.toolserver.ops import glob, grep, ls
from sandbox_runner.sandbox.toolserver.processes import run_process
from sandbox_runner.sandbox.toolserver.protocol import JsonDict, Outcome, ToolError
from sandbox_runner.sandbox.toolserver.server import ToolServer
from tests.conftest import unavailable

Op = Callable[[ToolServer, JsonDict, float], Outcome]


def make_tree(root: Path, directories: int, files: int) -> None:
    """DIRECTORIES directories d00.. of FILES files f00.py.. each, oldest first."""
    stamp = 1_000_000
    for directory in range(directories):
        for file in range(files):
            path = root / f"d{directory:02d}" / f"f{file:02d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"def value_{directory}_{file}():\n    return {file}\n")
            stamp += 1
            os.utime(path, (stamp, stamp))


@pytest.fixture
def server(tmp_path: Path) -> ToolServer:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    tool_server = ToolServer(str(workspace), str(plan_dir), [], (1 << 20, 100))
    tool_server.warmed_up.set()  # commands may start: nothing here needs the warm-up
    return tool_server


def run(server: ToolServer, op: Op, args: JsonDict, timeout: float = 30) -> Outcome:
    return op(server, args, timeout)


# ----------------------------------------------------------------------------- glob


def test_glob_past_the_cap_lists_the_first_matches_by_path_and_says_how_to_narrow(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 4, 5)
    monkeypatch.setattr(glob, "GLOB_MAX_RESULTS", 7)
    outcome = run(server, glob.op_glob, {"pattern": "**/*.py"})
    lines = outcome.output.splitlines()
    expected = [f"d00/f{n:02d}.py" for n in range(5)] + ["d01/f00.py", "d01/f01.py"]
    assert lines[:-1] == [f"{server.workspace}/{name}" for name in expected]
    assert lines[-1] == (
        "[showing the first 7 matches by path; there are more: "
        "narrow with path= or a more specific pattern]"
    )
    assert outcome.truncated and outcome.meta == {"matches": 7, "complete": False}
    assert run(server, glob.op_glob, {"pattern": "**/*.py"}).output == outcome.output


def test_glob_within_the_cap_lists_newest_first(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 4, 5)
    monkeypatch.setattr(glob, "GLOB_MAX_RESULTS", 7)
    outcome = run(server, glob.op_glob, {"pattern": "d0[23]/f0[01].py"})
    names = [line.removeprefix(server.workspace + "/") for line in outcome.output.splitlines()]
    assert names == ["d03/f01.py", "d03/f00.py", "d02/f01.py", "d02/f00.py"]
    assert not outcome.truncated and outcome.meta == {"matches": 4, "complete": True}


def test_glob_stops_reading_directories_at_the_cap(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 40, 5)
    monkeypatch.setattr(glob, "GLOB_MAX_RESULTS", 3)
    read: list[str] = []
    real = glob.sorted_entries

    def counted(directory: str) -> Iterator[os.DirEntry[str]]:
        read.append(directory)
        return real(directory)

    monkeypatch.setattr(glob, "sorted_entries", counted)
    outcome = run(server, glob.op_glob, {"pattern": "**/*"})
    assert len(outcome.output.splitlines()) == 4
    assert read == [server.workspace, f"{server.workspace}/d00"]


def test_glob_at_its_deadline_returns_the_matches_so_far(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 3, 5)
    clock = iter(range(1_000_000))
    # Each look at the clock is a second later: the walk runs out after a few entries.
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    outcome = run(server, glob.op_glob, {"pattern": "**/*.py"}, timeout=6)
    lines = outcome.output.splitlines()
    assert lines[:-1] == [f"{server.workspace}/d00/f{n:02d}.py" for n in range(5)]
    assert lines[-1] == (
        "[glob timed out after 6 s: the 5 matches found so far, by path; "
        "narrow with path= or a more specific pattern]"
    )
    assert outcome.truncated
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(ToolError, match="before a match; narrow it with path=") as error:
        run(server, glob.op_glob, {"pattern": "**/*.rs"}, timeout=6)
    assert error.value.timed_out


# ----------------------------------------------------------------------------- ls


def test_ls_of_a_directory_past_the_cap_keeps_only_what_it_shows(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(server.workspace)
    for number in range(60):
        (root / f"n{number:02d}").write_text("")
    monkeypatch.setattr(ls, "LS_MAX_ENTRIES", 10)
    outcome = run(server, ls.op_ls, {})
    lines = outcome.output.splitlines()
    assert lines[1:-1] == [f"  - n{number:02d}" for number in range(10)]
    assert lines[-1] == (
        "[listing cut at 10 entries; 50 more; "
        "pass a deeper path, or use Glob or Grep to find files]"
    )
    assert outcome.truncated and outcome.meta == {"more": 50}


def test_ls_counts_what_is_left_in_every_open_directory(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 3, 5)
    monkeypatch.setattr(ls, "LS_MAX_ENTRIES", 4)
    outcome = run(server, ls.op_ls, {})
    assert outcome.output.splitlines()[1:] == [
        "  - d00/",
        "    - f00.py",
        "    - f01.py",
        "    - f02.py",
        # Two files of d00 and two directories of the root; d01's and d02's are unread.
        "[listing cut at 4 entries; 4 more, and what the directories not opened hold; "
        "pass a deeper path, or use Glob or Grep to find files]",
    ]


def test_ls_says_it_is_cut_when_the_last_directory_shown_could_not_be_opened(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(server.workspace)
    for name in ("a", "b", "c"):
        (root / name).write_text("")
    (root / "z").mkdir()
    (root / "z" / "inside.txt").write_text("")
    monkeypatch.setattr(ls, "LS_MAX_ENTRIES", 4)
    outcome = run(server, ls.op_ls, {})
    assert outcome.output.splitlines()[1:] == [
        "  - a",
        "  - b",
        "  - c",
        "  - z/",
        "[listing cut at 4 entries; what the directories not opened hold; "
        "pass a deeper path, or use Glob or Grep to find files]",
    ]
    assert outcome.truncated


def test_ls_within_the_cap_is_complete(server: ToolServer) -> None:
    make_tree(Path(server.workspace), 2, 2)
    outcome = run(server, ls.op_ls, {"path": "d01"})
    assert outcome.output.splitlines() == [f"- {server.workspace}/d01/", "  - f00.py", "  - f01.py"]
    assert not outcome.truncated and outcome.meta == {"more": 0}


# ----------------------------------------------------------------------------- grep


def test_a_command_with_endless_output_is_stopped_at_the_record_count(
    server: ToolServer,
) -> None:
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('line\\n')"]
    started = time.monotonic()
    result = run_process(
        server,
        endless,
        timeout=60,
        limits=(1 << 20, 1 << 10),
        cwd="/",
        git_env={},
        stop_after=(5, b"\n"),
    )
    assert time.monotonic() - started < 10
    assert result.stdout.stopped and not result.timed_out
    assert result.stdout.data() == b"line\n" * 5


def test_a_command_with_exactly_the_record_count_is_not_stopped(server: ToolServer) -> None:
    five = [sys.executable, "-c", "print('a\\nb\\nc\\nd\\ne')"]
    result = run_process(
        server, five, timeout=60, limits=(1 << 20, 1 << 10), cwd="/", git_env={},
        stop_after=(5, b"\n"),
    )  # fmt: skip
    assert not result.stdout.stopped and result.returncode == 0
    assert result.stdout.data() == b"a\nb\nc\nd\ne\n"


@pytest.fixture
def ripgrep() -> None:
    if shutil.which("rg") is None:
        unavailable("ripgrep (rg) is not installed on the host (Debian package ripgrep)")


@pytest.mark.usefixtures("ripgrep")
def test_grep_with_more_matches_than_it_shows_stops_and_says_so(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 2, 10)
    monkeypatch.setattr(grep, "GREP_MAX_LINES", 5)
    note = (
        "[the search stopped after 5 {unit}; more match: "
        "narrow with path=, glob=, type= or a more specific pattern]"
    )
    content = run(server, grep.op_grep, {"pattern": "return", "output_mode": "content"})
    lines = content.output.splitlines()
    assert lines[0] == note.format(unit="lines")
    assert lines[1:] == [f"{server.workspace}/d00/f{n:02d}.py:2:    return {n}" for n in range(5)]
    assert content.truncated and content.meta == {"rg_exit": 0, "stopped": True}
    files = run(server, grep.op_grep, {"pattern": "def value"}).output.splitlines()
    assert files[:2] == [note.format(unit="files"), "Found at least 5 files"]
    assert len(files) == 7
    count = run(server, grep.op_grep, {"pattern": "def", "output_mode": "count", "head_limit": 2})
    # Which files come first is ripgrep's parallel order: count mode does not sort.
    counted = count.output.splitlines()
    assert all(line.endswith(".py:1") for line in counted[1:3])
    assert counted[:1] + counted[3:] == [
        note.format(unit="lines"),
        "[showing first 2 of at least 5 lines (head_limit)]",
        "",
        "Found at least 5 matching lines in at least 5 files",
    ]


@pytest.mark.usefixtures("ripgrep")
def test_grep_within_the_cap_is_complete(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 2, 2)
    monkeypatch.setattr(grep, "GREP_MAX_LINES", 5)
    outcome = run(server, grep.op_grep, {"pattern": "def", "output_mode": "count"})
    assert outcome.output.splitlines()[-1] == "Found 4 matching lines in 4 files"
    assert not outcome.truncated and outcome.meta == {"rg_exit": 0, "stopped": False}


@pytest.mark.usefixtures("ripgrep")
def test_a_grep_that_times_out_says_how_to_narrow_it(
    server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(Path(server.workspace), 2, 2)
    real_run = grep.run_process  # type: ignore[attr-defined]

    def slow_start(server: ToolServer, argv: list[str], **options: Any) -> Any:
        # ripgrep still running at the time limit however fast or loaded the machine is.
        return real_run(server, ["sh", "-c", 'sleep 30; exec "$@"', "sh", *argv], **options)

    monkeypatch.setattr(grep, "run_process", slow_start)
    with pytest.raises(ToolError) as error:
        run(server, grep.op_grep, {"pattern": "def"}, timeout=1)
    assert error.value.timed_out
    assert error.value.message == (
        "grep timed out after 1 s; narrow with path=, glob=, type= or a more specific pattern"
    )
