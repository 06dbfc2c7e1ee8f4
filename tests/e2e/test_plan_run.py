"""One Plan subagent end to end: SDK -> fake API, tools in a real read-only container."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.model.anthropic_model import AnthropicModel
from sandbox_runner.plans.results import PlanStatus
from sandbox_runner.runs.plan_job import PlanJob, run_plan
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import SandboxSpec
from tests.conftest import make_sample_repo
from tests.docker.conftest import tree_hash
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.unit.test_plan_loop import VALID_PLAN

ATTEMPTS_TO_CHANGE_THINGS = [
    tool_use("Write", {"file_path": "/workspace/src/app.py", "content": "pwned"}),
    tool_use("Edit", {"file_path": "README.md", "old_string": "demo", "new_string": "pwned"}),
    tool_use("Bash", {"command": "mkdir /workspace/newdir"}),
    tool_use("Bash", {"command": "touch src/new.py"}),
    tool_use("Bash", {"command": "rm -rf src"}),
    tool_use("Bash", {"command": "echo pwned > README.md"}),
    tool_use("Bash", {"command": "git commit -am pwned"}),
]


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    root = make_sample_repo(tmp_path / "repo")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "initial"], check=True)
    return root


def test_plan_run_in_docker_changes_nothing(
    git_repo: Path, tmp_path: Path, docker_client: Any, sandbox_image: str, test_session: str
) -> None:
    script = [
        message(tool_use("Glob", {"pattern": "**/*.py"})),
        message(tool_use("Grep", {"pattern": "def main", "output_mode": "content"})),
        message(tool_use("Read", {"file_path": "/workspace/src/app.py"})),
        message(tool_use("Bash", {"command": "git log --oneline | head -5"})),
        message(*ATTEMPTS_TO_CHANGE_THINGS),
        message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
        message(text("The plan is in /plan/plan.md.")),
    ]
    before = tree_hash(git_repo)

    def sandbox_factory(plan_dir: Path | None) -> DockerSandbox:
        if plan_dir is None:
            spec = SandboxSpec.probe(git_repo, sandbox_image, session=test_session)
        else:
            spec = SandboxSpec.plan(
                git_repo, plan_dir, sandbox_image, session=test_session, agent="Plan"
            )
        return DockerSandbox(spec, docker_client)

    with FakeMessagesAPI(script) as api:
        model = AnthropicModel("claude-test", api_key="test-key", base_url=api.base_url)
        result = run_plan(
            PlanJob("Add a --verbose flag"),
            workspace=git_repo,
            out_dir=tmp_path / "out",
            model=model,
            model_id="claude-test",
            sandbox_factory=sandbox_factory,
        )
        requests = api.message_requests

    assert result.status is PlanStatus.COMPLETE and result.valid, result.to_dict()
    assert tree_hash(git_repo) == before
    # Exploration worked inside the container.
    answers = [
        block
        for r in requests
        for m in r.body["messages"][-1:]
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    joined = "\n".join(str(a["content"]) for a in answers)
    assert "/workspace/src/app.py" in joined
    assert "initial" in joined
    # Every attempt to change something was refused before reaching the sandbox.
    refusals = requests[5].body["messages"][-1]["content"]
    assert len(refusals) == len(ATTEMPTS_TO_CHANGE_THINGS)
    assert all(block["is_error"] for block in refusals)
    assert "git commit -am pwned" in result.suggested_commands
    assert result.plan_path is not None and result.plan_path.read_text().count("src/app.py") >= 1
    # The API key went to the fake API, never into the container.
    assert requests[0].headers.get("authorization", requests[0].headers.get("x-api-key", "")) != ""
