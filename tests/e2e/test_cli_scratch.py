"""`planrun plan --scratch` end to end: the plan runs the project's tests and writes build
outputs and caches in a throw-away layer; the repository, its mtimes and `git status`
stay as they were, and the plan and the reports list the commands with their exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sandbox_runner.cli import cli
from sandbox_runner.plans.document import split_document
from sandbox_runner.sandbox.scratch import SCRATCH_LABEL
from tests.docker.test_scratch import OWNER, snapshot
from tests.support.fake_messages_api import FakeMessagesAPI, hang, message, text, tool_use
from tests.support.plan_scripts import PerspectiveScript
from tests.unit.test_plan_loop import VALID_PLAN

COMMANDS = [
    ("python3 -m unittest -v", 0),
    ("mkdir build && echo x > build/out && ls build", 0),
    ("test -d __pycache__ && false", 1),
]


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """Every test here runs real sandboxes."""


@pytest.fixture
def repo(sample_repo: Path) -> Path:
    """The sample repository with a unittest test, committed, owned by a regular user."""
    (sample_repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (sample_repo / "test_calc.py").write_text(
        "import unittest\nfrom calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@example.com", "-C", str(sample_repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(sample_repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    if os.geteuid() == 0:
        for path in [sample_repo, *sample_repo.rglob("*")]:
            os.chown(path, OWNER, OWNER, follow_symlinks=False)
    return sample_repo


def plan(*args: str) -> Result:
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def leftovers(docker_client: Any, label: str) -> list[str]:
    """The containers and scratch volumes still carrying label."""
    containers = docker_client.containers.list(all=True, filters={"label": label})
    volumes = docker_client.volumes.list(filters={"label": [SCRATCH_LABEL, label]})
    return [c.short_id for c in containers] + [v.name for v in volumes]


def test_a_scratch_plan_runs_tests_and_builds_and_leaves_the_repository_as_it_was(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    before = snapshot(repo)
    api.script = PerspectiveScript(
        {
            "plan": [
                *(message(tool_use("Bash", {"command": command})) for command, _ in COMMANDS),
                message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
                message(text("Done.")),
            ]
        }
    )
    out = tmp_path / "out"
    result = plan("Add a flag", "--repo", str(repo), "--out", str(out), "--scratch", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["plan_commands"] == "scratch" and report["workspace_unchanged"]
    expected = [{"command": command, "exit_code": code} for command, code in COMMANDS]
    assert report["plans"][0]["commands_run"] == expected
    metadata, _ = split_document((out / "plan.md").read_text())
    assert metadata["commands_run"] == expected
    assert "## Commands run" in (out / "report.md").read_text()
    assert "mkdir build" in (out / "report.html").read_text()
    answers = [
        str(block["content"])
        for request in api.message_requests
        for block in request.body["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert any("Ran 1 test" in answer and "OK" in answer for answer in answers)
    assert snapshot(repo) == before
    assert not (repo / "build").exists() and not (repo / "__pycache__").exists()
    assert leftovers(docker_client, f"io.planrun.session={out.name}") == []
    prompt = str(api.message_requests[0].body["system"])
    assert "Scratch Sandbox" in prompt and "Nothing you do persists" in prompt


def test_without_scratch_a_write_is_refused_and_the_prompt_says_read_only(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript(
        {
            "plan": [
                message(tool_use("Bash", {"command": "mkdir x"})),
                message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
                message(text("Done.")),
            ]
        }
    )
    out = tmp_path / "out"
    result = plan("Add a flag", "--repo", str(repo), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["plan_commands"] == "read-only"
    assert report["plans"][0]["commands_run"] == []
    assert report["plans"][0]["suggested_commands"] == ["mkdir x"]
    assert "Scratch Sandbox" not in str(api.message_requests[0].body["system"])


def test_a_project_config_cannot_turn_scratch_on(api: FakeMessagesAPI, repo: Path) -> None:
    (repo / ".planrun").mkdir()
    (repo / ".planrun" / "config.yaml").write_text("plan_commands: scratch\n")
    result = plan("x", "--repo", str(repo))
    assert result.exit_code == 2
    assert "cannot turn scratch runs on" in result.output and api.requests == []


def test_ctrl_c_removes_the_layer_with_the_sandbox(
    repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    script = PerspectiveScript({"plan": [message(tool_use("Bash", {"command": "ls"})), hang()]})
    out = tmp_path / "out"
    with FakeMessagesAPI(script) as server:
        env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="k")
        command = [sys.executable, "-m", "sandbox_runner", "plan", "x", "--repo", str(repo)]
        process = subprocess.Popen(
            [*command, "--out", str(out), "--scratch"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        label = f"io.planrun.pid={process.pid}"
        deadline = time.monotonic() + 60
        while len(script.seen) < 2 or len(leftovers(docker_client, label)) < 4:
            assert time.monotonic() < deadline and process.poll() is None, "never started"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert leftovers(docker_client, label) == []
    report = json.loads((out / "report.json").read_text())
    assert report["workspace_unchanged"] and report["plans"][0]["commands_run"] == [
        {"command": "ls", "exit_code": 0}
    ]


def test_a_batch_with_scratch_runs_its_tasks_in_the_layer(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    before = snapshot(repo)
    api.script = PerspectiveScript(
        {
            "plan": [
                message(tool_use("Bash", {"command": COMMANDS[1][0]})),
                message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
                message(text("Done.")),
            ]
        }
    )
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(f"tasks:\n  - id: flag\n    repo: {repo}\n    requirements: Add a flag.\n")
    out = tmp_path / "batch"
    command = ["batch", str(tasks), "--out", str(out), "--scratch", "--json"]
    result = CliRunner().invoke(cli, command, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "tasks" / "flag" / "report.json").read_text())
    assert report["plan_commands"] == "scratch"
    assert report["plans"][0]["commands_run"] == [{"command": COMMANDS[1][0], "exit_code": 0}]
    assert snapshot(repo) == before and not (repo / "build").exists()
    assert leftovers(docker_client, f"io.planrun.session=batch-{out.name}") == []
    ray = CliRunner().invoke(cli, [*command[:-1], "--engine", "ray"], catch_exceptions=False)
    assert ray.exit_code == 2 and "not available on Ray" in ray.output
