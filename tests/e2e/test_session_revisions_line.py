"""A plan session in line mode, for real (a `planrun` process, real containers, the fake
Messages API): a Write, an Edit, a "keep planning" round and another Edit of the plan
keep their revisions, which `planrun plans history` and `plans diff` show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.test_session_line import (
    PLAN,
    conversation,
    owned_repo,
    plan_file_in,
    planrun,
    read_until,
    turns_so_far,
)
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use


def script(body: dict[str, Any]) -> Any:
    turn = turns_so_far(body)
    if conversation(body) != "plan":
        return message(text("Done."))
    plan_file = plan_file_in(body)

    def edit(old: str, new: str) -> Any:
        return message(
            tool_use("Edit", {"file_path": plan_file, "old_string": old, "new_string": new})
        )

    steps = [
        message(tool_use("Write", {"file_path": plan_file, "content": PLAN})),
        edit("return 43.", "return 43, loudly."),
        message(tool_use("ExitPlanMode", {})),
        edit("loudly.", "loudly.\n\n## Test Plan\nAssert main() == 43."),
        message(tool_use("ExitPlanMode", {})),
        message(text("Waiting.")),
    ]
    return steps[min(turn, len(steps) - 1)]


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PLANRUN_HOME=str(home))
    command = [sys.executable, "-m", "sandbox_runner", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def test_plan_edits_and_a_keep_planning_round_keep_revisions(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = owned_repo(tmp_path / "repo")
    with FakeMessagesAPI(script) as api:
        process = planrun(api, "--repo", str(repo), home=planrun_home)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("/plan\nmake main louder\n")
        process.stdin.flush()
        seen = read_until(process.stdout, "approve? plan ready at")
        process.stdin.write("n add a test\n")
        process.stdin.flush()
        seen += read_until(process.stdout, "approve? plan ready at")
        out, err = process.communicate("y\n/status\n", 180)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    status = dict(
        line.split(": ", 1) for line in (seen + out).splitlines() if re.match(r"^[a-z_]+: ", line)
    )
    name = Path(status["plan_file"]).stem

    history = cli(planrun_home, "plans", "history", name)
    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert [line.split()[3] for line in lines] == ["agent-write", "agent-edit", "agent-edit"]
    assert "(again: keep-planning)" in lines[1] and "+1 -1" in lines[1]
    assert "+3 -0" in lines[2]
    diff = cli(planrun_home, "plans", "diff", name)
    assert diff.returncode == 0, diff.stderr
    assert diff.stdout.startswith("--- revision 2\n+++ revision 3\n")
    assert " Make main() return 43, loudly.\n" in diff.stdout
    assert "+Assert main() == 43.\n" in diff.stdout
    assert "\x1b[" not in diff.stdout  # piped: no colour
