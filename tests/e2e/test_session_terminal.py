"""`planrun` in a real terminal: tmux runs it against the fake Messages API with real
containers; the tests press keys (Shift+Tab, Enter, Ctrl-C) and read the screen."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_session_line import owned_repo
from tests.support.fake_messages_api import FakeMessagesAPI, hang, message, text, tool_use
from tests.support.tmux import Tmux


@pytest.fixture(autouse=True)
def tmux_is_there() -> None:
    """tmux is on every machine of this project; without it these tests fail, never pass."""
    if shutil.which("tmux") is None:
        pytest.fail("the terminal tests need tmux: apt-get install tmux", pytrace=False)


PLAN = (
    "# Plan: louder greeting\n\n<!-- Keep main's name. -->\n## Approach\nMake main() return 43.\n"
)
HIDDEN = "ls src" + "\n" * 60 + "touch /workspace/pwned"
BADGE_DEFAULT = "default mode (shift+tab to cycle)"
BADGE_EDITS = "⏵⏵ accept edits on (shift+tab to cycle)"
BADGE_PLAN = "⏸ plan mode on (shift+tab to cycle)"
PROMPT = r"(?m)^(plan )?›"


def _system(body: dict[str, Any]) -> str:
    return json.dumps(body["system"])


def _last_user_text(body: dict[str, Any]) -> str:
    for entry in reversed(body["messages"]):
        if entry["role"] == "user":
            for block in entry["content"]:
                if block.get("type") == "text":
                    return str(block["text"])
    return ""


def script(body: dict[str, Any]) -> Any:
    """The model: plans when in plan mode, edits after a kickoff, runs a command when
    asked, hangs when told to wait, and otherwise answers in Markdown."""
    last = body["messages"][-1]["content"]
    answered = any(block.get("type") == "tool_result" for block in last)
    if "Plan mode is active" in _system(body):
        plan_file = re.search(r"(/plan/[a-z0-9-]+\.md)", _system(body))
        assert plan_file is not None
        steps = [
            message(tool_use("Read", {"file_path": "src/app.py"})),
            message(tool_use("Write", {"file_path": plan_file.group(1), "content": PLAN})),
            message(tool_use("ExitPlanMode", {})),
            message(text("Tell me what to change.")),
        ]
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return steps[min(turn, len(steps) - 1)]
    user = _last_user_text(body)
    if answered:
        return message(text("Done with that."))
    if "wait" in user:
        return hang()
    if "run it" in user:
        return message(tool_use("Bash", {"command": "python3 -c 'print(6 * 7)'"}))
    if "set up" in user:
        return message(tool_use("Bash", {"command": HIDDEN}))
    if user.startswith("Start implementing the plan"):
        edit = {"file_path": "src/app.py", "old_string": "return 42", "new_string": "return 43"}
        return message(tool_use("Edit", edit))
    return message(text("Hello! This is **bold**.\n\n- one\n- two"))


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(script) as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return owned_repo(tmp_path / "repo")


def planrun(api: FakeMessagesAPI, repo: Path, home: Path, *args: str) -> Tmux:
    env = dict(os.environ, ANTHROPIC_BASE_URL=api.base_url, ANTHROPIC_API_KEY="k")
    env |= {"PLANRUN_HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    env.pop("TMUX", None)
    command = [sys.executable, "-m", "sandbox_runner", "--repo", str(repo), *args]
    return Tmux(command, env=env, cwd=repo)


def test_shift_tab_cycles_the_badge_with_its_colours(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(re.escape(BADGE_DEFAULT))
        term.keys("BTab")
        coloured = term.wait_for(re.escape(BADGE_EDITS), colours=True)
        assert re.search(r"\x1b\[[0-9;]*35m" + re.escape(BADGE_EDITS), coloured)
        term.keys("BTab")
        term.wait_for(re.escape(BADGE_PLAN))
        term.wait_for("plan mode: the plan file is")  # printed once the mode is saved
        [state] = (planrun_home / "sessions").glob("*/state.json")
        screen = term.wait_for(r"read-only · edits only to .*/plans/[a-z-]+\.md")
        assert "/apply-plan to implement" in screen and "/exit-plan to leave" in screen
        plan_file = json.loads(state.read_text())["plan_file"]
        assert plan_file and plan_file in screen.replace("\n", "")
        coloured = term.screen(colours=True)
        assert re.search(r"\x1b\[[0-9;]*36m" + re.escape(BADGE_PLAN), coloured)
        term.keys("BTab")
        term.wait_for(re.escape(BADGE_DEFAULT))
        assert "read-only ·" not in term.screen()
        term.keys("M-m")  # Alt+M, for terminals that eat Shift+Tab
        term.wait_for(re.escape(BADGE_EDITS))


def test_an_approval_answered_from_the_keyboard(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("please run it")
        term.keys("Enter")
        screen = term.wait_for("don't ask again for")
        assert "Allow the agent to run this command? (25 characters)" in screen
        assert "python3 -c 'print(6 * 7)'" in screen
        assert "No, and tell the agent what to do differently" in screen
        term.keys("Down", "Enter")  # "Yes, and don't ask again ..."
        term.wait_for("Done with that.")
        term.wait_for(r"● Bash python3")
    [state] = (planrun_home / "sessions").glob("*/state.json")
    assert json.loads(state.read_text())["approved_prefixes"]


def test_an_approval_shows_a_hidden_payload_pages_it_and_never_offers_it_for_good(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ls src`, 60 line breaks, then a payload: it read as "run `ls src`" with "don't ask
    again for `ls src`", and Yes ran the payload."""
    monkeypatch.setenv("PAGER", "less")
    monkeypatch.setenv("LESS", "")
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("please set up")
        term.keys("Enter")
        screen = term.wait_for(re.escape(f"run this command? ({len(HIDDEN)} characters on 61"))
        assert re.search(r"(?m)^ *ls src⏎\n *⏎×59\n *touch /workspace/pwned$", screen), screen
        assert "don't ask again" not in screen
        term.keys("v")
        paged = term.wait_for(r"\(END\)")
        assert "touch /workspace/pwned" in paged and "Allow the agent" not in paged
        term.keys("q")
        term.wait_for(r"(?s)(Allow the agent to run this command.*){2}2\. No, and tell the agent")
        term.keys("Down", "Enter")  # the second answer is No
        term.wait_for("What should the agent do instead")
        term.keys("Enter")
        term.wait_for("Done with that.")
    assert not (repo / "pwned").exists()


def test_plan_review_accepted_into_accept_edits_then_the_edit_lands(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home, "--plan") as term:
        term.wait_for(re.escape(BADGE_PLAN))
        term.type("make main louder")
        term.keys("Enter")
        screen = term.wait_for("Yes, and auto-accept edits")
        assert "Make main() return 43." in screen and "/plans/" in screen
        assert "<!-- Keep main's name. -->" in screen  # as the agent receives it
        assert "Edit the plan in $EDITOR first" in screen
        assert "No, keep planning (tell the agent what to change)" in screen
        # The cursor starts on "Yes, manually approve edits": one up is auto-accept.
        assert re.search(r"[>❯] *2\. Yes, manually approve edits", screen), screen
        term.keys("Up", "Enter")
        term.wait_for(re.escape(BADGE_EDITS))
        screen = term.wait_for("Done with that.")
        assert "Allow the agent to" not in screen.split("ExitPlanMode")[-1]  # no approval
    [transcript] = (planrun_home / "sessions").glob("*/work.transcript.jsonl")
    [edit] = [
        entry
        for entry in map(json.loads, transcript.read_text().splitlines())
        if entry["type"] == "tool_result" and entry["name"] == "Edit"
    ]
    assert not edit["is_error"], edit["content"]
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 43\n"


def test_ctrl_c_interrupts_a_turn_then_quits_and_continue_comes_back_in_plan_mode(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("wait for it")
        term.keys("Enter")
        term.wait_for("esc to interrupt")
        term.keys("C-c")
        term.wait_for("stopped: interrupted")
        term.wait_gone("esc to interrupt")
        term.keys("BTab", "BTab")
        term.wait_for(re.escape(BADGE_PLAN))
        term.keys("C-c")
        term.wait_for("press Ctrl-C again to quit")
        term.keys("C-c")
        term.wait_exit()
    [state] = (planrun_home / "sessions").glob("*/state.json")
    saved = json.loads(state.read_text())
    assert saved["mode"] == "plan"
    with planrun(api, repo, planrun_home, "--continue") as term:
        term.wait_for(re.escape(BADGE_PLAN))
        # The first line is printed above the prompt once it is up.
        term.wait_for(re.escape(f"resumed session {saved['id']}-plan in plan mode"))
        term.keys("C-d")
        term.wait_exit()


def test_bang_runs_in_the_work_container_and_exit_says_how_to_come_back(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("!ls src; whoami; test -f /.dockerenv")
        term.keys("Enter")
        screen = term.wait_for(r"\(exit status \d+\)")
        assert "app.py" in screen and "(exit status 0)" in screen  # in the container
        assert "Allow the agent" not in screen  # the user typed it: nothing to approve
        term.type("hello")
        term.keys("Enter")
        term.wait_for("Hello! This is")
        term.type("/exit")
        term.keys("Enter")
        term.wait_exit()
        assert re.search(r"session [a-z-]+ kept: planrun --continue", term.screen())
    [request] = api.message_requests
    notes = [block["text"] for block in request.body["messages"][0]["content"]]
    assert notes[0] == "hello"
    assert "<bash-input>ls src; whoami; test -f /.dockerenv</bash-input>" in notes[1]
