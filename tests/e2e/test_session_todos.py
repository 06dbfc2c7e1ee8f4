"""The checklist and `@path` mentions for real: `planrun` in tmux (and in line mode)
against the fake Messages API, with real containers. An accepted plan's steps become the
checklist, the agent updates it with TodoWrite, it shows above the prompt and comes back
with --continue; `@` + Tab completes a path whose content then reaches the model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.e2e.test_session_line import owned_repo, read_until
from tests.e2e.test_session_line import planrun as line_planrun
from tests.e2e.test_session_terminal import BADGE_EDITS, BADGE_PLAN, planrun
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use

PLAN = """# Plan: louder greeting

## Approach
Make main() return 43.

## Detailed Steps
1. Change main() to return 43
2. Run the tests
"""
STEP_ONE, STEP_TWO = "Change main() to return 43", "Run the tests"


def _texts(entry: dict[str, Any]) -> list[str]:
    content = entry["content"]
    if isinstance(content, str):
        return [content]
    return [str(block.get("text", "")) for block in content if block.get("type") == "text"]


def script(body: dict[str, Any]) -> Any:
    """The plan agent writes PLAN; the work agent marks step one under way, edits, marks
    it done; a message with an attached file is answered with what the file holds."""
    system = json.dumps(body["system"])
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if "Plan mode is active" in system:
        plan_file = re.search(r"(/plan/[a-z0-9-]+\.md)", system)
        assert plan_file is not None
        steps = [
            message(tool_use("Write", {"file_path": plan_file.group(1), "content": PLAN})),
            message(tool_use("ExitPlanMode", {})),
            message(text("Tell me what to change.")),
        ]
        return steps[min(turn, len(steps) - 1)]
    last = body["messages"][-1]
    if last["role"] == "user" and any("### Attached file: src/app.py" in t for t in _texts(last)):
        return message(text("Got the file."))
    under_way = {"content": STEP_ONE, "status": "in_progress", "activeForm": "Changing main()"}
    done = {"content": STEP_ONE, "status": "completed"}
    pending = {"content": STEP_TWO, "status": "pending"}
    edit = {"file_path": "src/app.py", "old_string": "return 42", "new_string": "return 43"}
    steps = [
        message(tool_use("TodoWrite", {"todos": [under_way, pending]})),
        message(tool_use("Edit", edit)),
        message(tool_use("TodoWrite", {"todos": [done, pending]})),
        message(text("Step one is done.")),
    ]
    return steps[min(turn, len(steps) - 1)]


def _sent_texts(api: FakeMessagesAPI) -> str:
    return "\n".join(
        t for request in api.message_requests for m in request.body["messages"] for t in _texts(m)
    )


def test_the_checklist_above_the_prompt_todos_continue_and_an_at_mention(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = owned_repo(tmp_path / "repo")
    with FakeMessagesAPI(script) as api:
        with planrun(api, repo, planrun_home, "--plan") as term:
            term.wait_for(re.escape(BADGE_PLAN))
            term.type("make main louder")
            term.keys("Enter")
            term.wait_for("Yes, and auto-accept edits")
            term.keys("Up", "Enter")
            term.wait_for(re.escape(BADGE_EDITS))
            screen = term.wait_for("Step one is done.")
            assert len(re.findall(r"● TodoWrite ✓", screen)) == 2
            # Above the prompt: step one ticked, step two still to do.
            screen = term.wait_for(rf"☑ {re.escape(STEP_ONE)}\n *☐ {STEP_TWO}\n›")
            term.type("/todos")
            term.keys("Enter")
            screen = term.wait_for(r"checklist: 1 of 2 done")
            assert f"1. [x] {STEP_ONE}" in screen and f"2. [ ] {STEP_TWO}" in screen
            term.keys("C-d")
            term.wait_exit()
        [state] = (planrun_home / "sessions").glob("*/state.json")
        assert [item["status"] for item in json.loads(state.read_text())["todos"]] == [
            "completed",
            "pending",
        ]
        with planrun(api, repo, planrun_home, "--continue") as term:
            term.wait_for(rf"☑ {re.escape(STEP_ONE)}\n *☐ {STEP_TWO}\n›")
            term.type("what does @src/ap")
            term.wait_for("src/app.py")  # the completion menu, while typing
            term.keys("Tab")
            term.wait_for(r"› what does @src/app\.py")
            term.type(" return?")
            term.keys("Enter")
            screen = term.wait_for("Got the file.")
            assert re.search(r"@src/app\.py`?: attached \(2 lines\)", screen), screen
            term.keys("C-d")
            term.wait_exit()
    sent = _sent_texts(api)
    assert "The plan's steps are your checklist now" in sent
    assert "what does @src/app.py return?\n\n### Attached file: src/app.py" in sent
    assert "def main():\n    return 43" in sent  # the file as it is now, after the edit


def test_line_mode_prints_the_checklist_and_attaches_a_mention(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = owned_repo(tmp_path / "repo")
    with FakeMessagesAPI(script) as api:
        process = line_planrun(api, "--repo", str(repo), home=planrun_home)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("/plan\nmake main louder\n")
        process.stdin.flush()
        seen = read_until(process.stdout, "approve? plan ready at")
        process.stdin.write("y acceptEdits\n")
        process.stdin.flush()
        seen += read_until(process.stdout, "Step one is done.")
        out, err = process.communicate("tell me about @src/app.py\n/todos\n", 180)
    assert process.returncode == 0, err
    out = seen + out
    assert "checklist:\n  [~] Change main() to return 43\n  [ ] Run the tests\n" in out
    assert "checklist:\n  [x] Change main() to return 43\n  [ ] Run the tests\n" in out
    assert "`@src/app.py`: attached (2 lines)" in out and "Got the file." in out
    assert "checklist: 1 of 2 done" in out
    assert "tell me about @src/app.py\n\n### Attached file: src/app.py" in _sent_texts(api)
