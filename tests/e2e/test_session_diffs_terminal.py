"""Diffs, /diff and /undo in a real terminal (tmux, real containers, the fake Messages
API): coloured hunks in the approval dialog and under each edit, and the commands."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_session_diffs import LONG, repo_with_long_file, script
from tests.e2e.test_session_terminal import PROMPT, planrun
from tests.support.fake_messages_api import FakeMessagesAPI

CYAN, RED, GREEN = r"\x1b\[[0-9;]*36m", r"\x1b\[[0-9;]*31m", r"\x1b\[[0-9;]*32m"


@pytest.fixture(autouse=True)
def tmux_is_there() -> None:
    if shutil.which("tmux") is None:
        pytest.fail("the terminal tests need tmux: apt-get install tmux", pytrace=False)


def test_the_approval_shows_a_coloured_diff_then_diff_and_undo(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = repo_with_long_file(tmp_path / "repo")
    with FakeMessagesAPI(script) as api, planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("please edit it")
        term.keys("Enter")
        screen = term.wait_for("Allow the agent to edit src/long.py")
        assert "@@ -5,6 +5,6 @@" in screen and "/workspace" not in screen
        coloured = term.screen(colours=True)
        assert re.search(CYAN + re.escape("@@ -5,6 +5,6 @@"), coloured), coloured
        assert re.search(RED + "-line 8", coloured) and re.search(GREEN + r"\+LINE 8", coloured)
        term.keys("Enter")
        term.wait_for("⎿ src/long.py: 1 line added, 1 removed")
        term.wait_for("Done.")
        term.type("/diff")
        term.keys("Enter")
        term.wait_for(r"(?s)1 file changed by the agent this session.*\+LINE 8")
        coloured = term.screen(colours=True)
        assert re.search(GREEN + r"\+LINE 8", coloured.split("this session")[-1]), coloured
        term.type("/undo")
        term.keys("Enter")
        term.wait_for(r"restored: src/long.py")
    assert (repo / "src" / "long.py").read_text() == LONG


def test_accept_edits_shows_the_diff_under_the_edit_and_undo_refuses_a_users_change(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = repo_with_long_file(tmp_path / "repo")
    with (
        FakeMessagesAPI(script) as api,
        planrun(api, repo, planrun_home, "--mode", "acceptEdits") as term,
    ):
        term.wait_for(PROMPT)
        term.type("please create a file")
        term.keys("Enter")
        screen = term.wait_for(r"(?s)● Write src/new\.py ✓\n *⎿ src/new\.py: new file.*\+x = 1")
        assert "Allow the agent" not in screen
        term.wait_for("Done.")
        # The turn ends (its checkpoint taken) after its last words: a change made before
        # then would be the turn's. A command typed during a turn waits for its end, so
        # /cost's answer says the turn is over.
        term.type("/cost")
        term.keys("Enter")
        term.wait_for(r"total: [\d,]+ tokens")
        (repo / "src" / "new.py").write_text("x = 2  # mine\n")
        term.type("/undo")
        term.keys("Enter")
        term.wait_for(r"/undo refused: src/new\.py changed since")
    assert (repo / "src" / "new.py").read_text() == "x = 2  # mine\n"
