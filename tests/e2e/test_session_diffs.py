"""Diffs, /diff and /undo for real, in line mode: a `planrun` process, real containers,
the real SDK against the fake Messages API. The approval shows the edit's real hunk
header and the repository path, acceptEdits shows each edit's diff, /diff lists the
session's changes, and /undo takes turns back (never over the user's change, never
through a link the model planted)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.test_session_line import owned_repo, planrun, read_until
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use

LONG = "".join(f"line {number}\n" for number in range(1, 11))
OUTSIDE = "/tmp/planrun-undo-target"


def _asked(body: dict[str, Any]) -> str:
    """The user's message that started the turn under way."""
    for entry in reversed(body["messages"]):
        if entry["role"] != "user":
            continue
        for block in entry["content"]:
            if block.get("type") == "text" and not block["text"].startswith("The user undid"):
                return str(block["text"])
    return ""


def script(body: dict[str, Any]) -> Any:
    """The work agent: edits line 8 of src/long.py, writes a new file, or swaps
    src/long.py for a link out of the repository, as asked; then says it is done."""
    if any(block.get("type") == "tool_result" for block in body["messages"][-1]["content"]):
        return message(text("Done."))
    asked = _asked(body)
    if "edit" in asked:
        edit = {"file_path": "src/long.py", "old_string": "line 8\n", "new_string": "LINE 8\n"}
        return message(tool_use("Edit", edit))
    if "create" in asked:
        return message(tool_use("Write", {"file_path": "src/new.py", "content": "x = 1\n"}))
    if "swap" in asked:
        command = f"rm src/long.py && ln -s {OUTSIDE} src/long.py"
        return message(tool_use("Bash", {"command": command}))
    return message(text("Nothing to do."))


def repo_with_long_file(root: Path) -> Path:
    repo = owned_repo(root)
    (repo / "src" / "long.py").write_text(LONG)
    if (repo / "src" / "app.py").stat().st_uid != (repo / "src" / "long.py").stat().st_uid:
        import os

        os.chown(repo / "src" / "long.py", 4321, 4321)
    return repo


def test_an_approval_shows_the_real_diff_then_diff_and_undo(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = repo_with_long_file(tmp_path / "repo")
    with FakeMessagesAPI(script) as api:
        process = planrun(api, "--repo", str(repo), home=planrun_home)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("please edit it\n")
        process.stdin.flush()
        seen = read_until(process.stdout, "approve? edit src/long.py")
        process.stdin.write("y\nnow create a file\n")
        process.stdin.flush()
        seen += read_until(process.stdout, "approve? write src/new.py")
        out, err = answer(process, "y\n/diff\n/undo\n/undo\n")
    assert process.returncode == 0, err
    approval = seen.split("please edit")[-1]
    assert "  --- a/src/long.py\n  +++ b/src/long.py\n  @@ -5,6 +5,6 @@\n" in approval
    assert "  -line 8\n  +LINE 8\n   line 9\n" in approval
    assert "/workspace" not in approval
    assert "⎿ src/long.py: 1 line added, 1 removed" in seen
    assert "--- /dev/null\n  +++ b/src/new.py\n  @@ -0,0 +1 @@\n  +x = 1" in seen + out
    diff = out.split("2 files changed by the agent this session")[1]
    assert "+++ b/src/long.py\n@@ -5,6 +5,6 @@" in diff and "+++ b/src/new.py" in diff
    assert "\x1b[" not in out  # not a terminal: no colour
    assert "undid turn 2:\n  removed: src/new.py" in out
    assert "undid turn 1:\n  restored: src/long.py" in out
    assert (repo / "src" / "long.py").read_text() == LONG
    assert not (repo / "src" / "new.py").exists()


def test_accept_edits_shows_each_edit_and_undo_refuses_over_the_users_change(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = repo_with_long_file(tmp_path / "repo")
    with FakeMessagesAPI(script) as api:
        process = planrun(api, "--repo", str(repo), "--mode", "acceptEdits", home=planrun_home)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("please edit it\n")
        process.stdin.flush()
        seen = read_until(process.stdout, "Done.")
        # The turn ends (and its checkpoint is taken) after its last words are shown: a
        # command is read only then, so its answer says the turn is over.
        process.stdin.write("/status\n")
        process.stdin.flush()
        read_until(process.stdout, "session: ")
        (repo / "src" / "long.py").write_text(LONG + "mine\n")
        out, err = answer(process, "/undo\n")
    assert process.returncode == 0, err
    assert "approve?" not in seen
    assert "  ⎿ src/long.py: 1 line added, 1 removed\n@@ -5,6 +5,6 @@\n" in seen
    assert re.search(r"error: /undo refused: src/long.py changed since", out)
    assert (repo / "src" / "long.py").read_text() == LONG + "mine\n"


def test_undo_after_the_model_swapped_a_file_for_a_link_writes_nothing_outside(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = repo_with_long_file(tmp_path / "repo")
    target = Path(OUTSIDE)
    target.write_text("outside the repository\n")
    try:
        with FakeMessagesAPI(script) as api:
            process = planrun(api, "--repo", str(repo), "--mode", "acceptEdits", home=planrun_home)
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("please edit it\n")
            process.stdin.flush()
            read_until(process.stdout, "Done.")
            process.stdin.write("now swap it\n")
            process.stdin.flush()
            seen = read_until(process.stdout, "approve? run")
            out, err = answer(process, "y\n/undo 2\n")
        assert process.returncode == 0, err
        assert (repo / "src" / "long.py").is_symlink() is False, seen + out
        assert (repo / "src" / "long.py").read_text() == LONG
        assert target.read_text() == "outside the repository\n"
        assert "undid turns 1, 2:" in out
    finally:
        target.unlink()


def answer(process: subprocess.Popen[str], lines: str) -> tuple[str, str]:
    return process.communicate(lines, 180)
