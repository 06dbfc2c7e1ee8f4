"""`planrun verify --judge` end to end: the judge in a real read-only container, reading the
change with git there, the real SDK against the fake Messages API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.judge_repo import HALF_DONE, VERDICT_PATH, half_done_repo


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """The judge runs in a real sandbox."""


def tool_results(body: dict[str, Any]) -> str:
    """The tool results the last request sends back, as text."""
    return json.dumps(body["messages"][-1]["content"])


def test_the_judge_reads_the_change_with_git_in_its_sandbox_and_leaves_nothing_behind(
    api: FakeMessagesAPI, tmp_path: Path, docker_client: Any
) -> None:
    repo, plan = half_done_repo(tmp_path)
    api.script = [
        message(tool_use("Bash", {"command": "git diff HEAD -- src/util.py"})),
        message(tool_use("Bash", {"command": "touch /workspace/src/planted.py"})),
        message(tool_use("Write", {"file_path": VERDICT_PATH, "content": HALF_DONE})),
        message(text("Judged.")),
    ]
    args = ["verify", str(plan), "--repo", str(repo), "--judge", "--strict", "--json"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["reasons"] == [] and document["judge"]["drift"] is True
    bodies = [request.body for request in api.message_requests]
    assert "+# logs each step" in tool_results(bodies[1])  # git ran in the sandbox
    assert not (repo / "src" / "planted.py").exists()
    assert "`touch /workspace/src/planted.py` was not run" in tool_results(bodies[2])
    session = Path(document["judge"]["transcript"]).parent.name
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"io.planrun.session={session}"}
    )
    assert leftovers == []
