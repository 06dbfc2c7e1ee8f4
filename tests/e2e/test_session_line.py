"""`planrun` in line mode, for real: a `planrun` process, real containers, the real SDK
against the fake Messages API. Plan mode refuses every write but the plan file, the plan
is accepted into acceptEdits, and the work container then edits the repository."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from tests.conftest import make_sample_repo
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use

PLAN = """# Plan: louder greeting

## Approach
Make main() return 43.
"""


def conversation(body: dict[str, Any]) -> str:
    system = body["system"][0]["text"] if isinstance(body["system"], list) else body["system"]
    if "Plan mode is active" in system:
        return "plan"
    if "You are a subagent" in system:
        return "task"
    return "work"


def plan_file_in(body: dict[str, Any]) -> str:
    system = json.dumps(body["system"])
    found = re.search(r"(/plan/[a-z0-9-]+\.md)", system)
    assert found, "the plan session's prompt names its plan file"
    return found.group(1)


def turns_so_far(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def script(body: dict[str, Any]) -> Any:
    which, turn = conversation(body), turns_so_far(body)
    if which == "plan":
        plan_file = plan_file_in(body)
        steps = [
            message(tool_use("Read", {"file_path": "src/app.py"})),
            message(tool_use("Write", {"file_path": "src/app.py", "content": "hacked"})),
            message(tool_use("Bash", {"command": "touch /workspace/pwned"})),
            message(tool_use("Write", {"file_path": plan_file, "content": PLAN})),
            message(tool_use("ExitPlanMode", {})),
            message(text("Waiting.")),
        ]
        return steps[min(turn, len(steps) - 1)]
    steps = [
        message(
            tool_use(
                "Edit",
                {"file_path": "src/app.py", "old_string": "return 42", "new_string": "return 43"},
            )
        ),
        message(text("Done: main() returns 43.")),
    ]
    return steps[min(turn, len(steps) - 1)]


def planrun(api: FakeMessagesAPI, *args: str, home: Path) -> subprocess.Popen[str]:
    env = dict(
        os.environ,
        ANTHROPIC_BASE_URL=api.base_url,
        ANTHROPIC_API_KEY="k",
        PLANRUN_HOME=str(home),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox_runner", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def read_until(stream: IO[str], text: str, seconds: float = 120) -> str:
    """What STREAM prints up to the line that holds TEXT, that line included."""
    deadline = time.monotonic() + seconds
    seen = ""
    while text not in seen:
        assert time.monotonic() < deadline, seen
        line = stream.readline()
        assert line, f"the output ended before {text!r}: {seen}"
        seen += line
    return seen


def owned_repo(root: Path) -> Path:
    """A sample repository owned by a regular user: the work container runs as its owner
    (never as root), so, when the tests run as root, it must not be root's."""
    repo = make_sample_repo(root)
    if os.geteuid() == 0:
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, 4321, 4321)
    return repo


def test_plan_accept_and_implement_in_line_mode(tmp_path: Path, planrun_home: Path) -> None:
    repo = owned_repo(tmp_path / "repo")
    with FakeMessagesAPI(script) as api:
        process = planrun(api, "--repo", str(repo), home=planrun_home)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("/plan\nmake main louder\n")
        process.stdin.flush()
        # An answer is written once the question is out: one written before is a message.
        seen = read_until(process.stdout, "approve? plan ready at")
        out, err = process.communicate("y acceptEdits\n/status\n", 180)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    out = seen + out
    results = [
        block
        for request in api.message_requests
        if conversation(request.body) == "plan"
        for block in request.body["messages"][-1]["content"]
        if block.get("type") == "tool_result"
    ]
    assert "only allowed on the plan file" in results[1]["content"]
    assert "Plan mode is read-only" in results[2]["content"]
    assert not (repo / "pwned").exists()
    assert "approve? plan ready at" in out
    status = dict(line.split(": ", 1) for line in out.splitlines() if re.match(r"^[a-z_]+: ", line))
    assert status["mode"] == "acceptEdits" and status["previous_mode"] == "default"
    plan_file = Path(status["plan_file"])
    assert plan_file.read_text() == PLAN and plan_file.parent == planrun_home / "plans"
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 43\n"
    assert (repo / "src" / "app.py").stat().st_uid == (4321 if os.geteuid() == 0 else os.getuid())
    work = [r for r in api.message_requests if conversation(r.body) == "work"]
    kickoff = work[0].body["messages"][0]["content"][0]["text"]
    assert kickoff.startswith(f"Start implementing the plan at {plan_file}")


def test_kill_9_in_plan_mode_then_resume(tmp_path: Path, planrun_home: Path) -> None:
    repo = owned_repo(tmp_path / "repo")
    with FakeMessagesAPI(lambda body: message(text("Still exploring."))) as api:
        process = planrun(api, "--repo", str(repo), "--plan", home=planrun_home)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("look around\n")
        process.stdin.flush()
        read_until(process.stdout, "Still exploring.")
        process.send_signal(signal.SIGKILL)
        process.wait()
        [state_file] = (planrun_home / "sessions").glob("*/state.json")
        state = json.loads(state_file.read_text())
        again = planrun(api, "--repo", str(repo), "--continue", home=planrun_home)
        out, err = again.communicate("/status\n", 120)
    assert again.returncode == 0, err
    assert f"resumed session {state['id']}-plan in plan mode" in out
    assert f"plan_file: {state['plan_file']}" in out


def test_resume_id_switches_to_another_session_in_the_same_process(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = owned_repo(tmp_path / "repo")
    with FakeMessagesAPI(lambda body: message(text("Noted."))) as api:
        first = planrun(api, "--repo", str(repo), home=planrun_home)
        out, err = first.communicate("remember the first\n/exit\n", 120)
        assert first.returncode == 0, err
        [state_file] = (planrun_home / "sessions").glob("*/state.json")
        first_id = json.loads(state_file.read_text())["id"]
        second = planrun(api, "--repo", str(repo), home=planrun_home)
        out, err = second.communicate(f"/resume {first_id}\n/status\n", 120)
    assert second.returncode == 0, err
    assert f"switching to session {first_id}" in out
    assert f"resumed session {first_id} in default mode" in out
    assert out.count("kept: planrun --continue") == 1  # the one left
    assert f"session: {first_id}" in out  # /status ran in the resumed session
