"""MCP servers in `planrun plan` and in a session, end to end: the reference git server
in its container, the real SDK against the fake Messages API, an agent file naming MCP
tools, the approval given with `planrun mcp approve`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli
from tests.conftest import make_sample_repo
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.mcp_image import mcp_image
from tests.support.plan_scripts import PerspectiveScript
from tests.unit.test_plan_loop import VALID_PLAN

RESEARCHER = """---
name: researcher
description: Reads the history before planning.
tools: Read, Glob, mcp__git__git_log, mcp__git__git_commit
---
Plan from what the history says.
"""


def git(repo: Path, *args: str) -> str:
    command = ["git", "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@e", *args]
    return subprocess.run(command, cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path, planrun_home: Path, sandbox_image: str) -> Path:
    """A git repository with a .mcp.json (git, and time never approved) and an agent file."""
    root = make_sample_repo(tmp_path / "repo")
    servers = {
        "git": {"command": "mcp-server-git", "args": ["--repository", "/workspace"]},
        "time": {"command": "mcp-server-time"},
    }
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (root / ".claude" / "agents").mkdir(parents=True)
    (root / ".claude" / "agents" / "researcher.md").write_text(RESEARCHER)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first commit: the history the planner reads")
    (planrun_home / "config.yaml").write_text(f"mcp_image: {mcp_image(sandbox_image)}\n")
    return root


def results_by_tool(transcript: Path) -> dict[str, dict[str, Any]]:
    entries = [json.loads(line) for line in transcript.read_text().splitlines()]
    return {entry["name"]: entry for entry in entries if entry["type"] == "tool_result"}


def test_plan_mode_reads_through_mcp_and_refuses_a_commit(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    runner = CliRunner()
    approved = runner.invoke(cli, ["mcp", "approve", "git", "--repo", str(repo)])
    assert approved.exit_code == 0 and "approved git" in approved.output
    api.script = PerspectiveScript(
        {
            "plan": [
                message(tool_use("mcp__git__git_log", {"repo_path": "/workspace"})),
                message(
                    tool_use("mcp__git__git_commit", {"repo_path": "/workspace", "message": "x"})
                ),
                message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
                message(text("The plan is written.")),
            ]
        }
    )
    head, out = git(repo, "rev-parse", "HEAD"), tmp_path / "out"
    result = runner.invoke(
        cli,
        ["plan", "Add a flag", "--repo", str(repo), "--agent", "researcher", "--out", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    # The unapproved server did not start, and the run said so in one line.
    [said] = [line for line in result.stderr.splitlines() if "'time'" in line]
    assert "not approved" in said and "planrun mcp approve time" in said
    # Plan mode offered the tool that reads, not the one that commits.
    offered = {tool["name"] for tool in api.message_requests[0].body["tools"]}
    assert "mcp__git__git_log" in offered and "mcp__git__git_commit" not in offered
    assert not any(name.startswith("mcp__time__") for name in offered)
    results = results_by_tool(out / "plan.transcript.jsonl")
    log, commit = results["mcp__git__git_log"], results["mcp__git__git_commit"]
    assert not log["is_error"] and "first commit: the history" in log["content"]
    assert commit["is_error"] and "not allowed in plan mode" in commit["content"]
    report = json.loads((out / "report.json").read_text())
    [suggested] = report["plans"][0]["suggested_commands"]
    assert suggested.startswith("mcp__git__git_commit {")
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""
    left = docker_client.containers.list(all=True, filters={"label": "io.planrun.agent=mcp-git"})
    assert left == []


def session_script(body: dict[str, Any]) -> Any:
    """The work session: commit through MCP (asked about, refused), then stop."""
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    steps = [
        message(tool_use("mcp__git__git_commit", {"repo_path": "/workspace", "message": "x"})),
        message(text("Understood, no commit.")),
    ]
    return steps[min(turn, len(steps) - 1)]


def test_the_work_session_asks_before_a_commit_and_the_approval_is_remembered(
    repo: Path, planrun_home: Path, docker_client: Any
) -> None:
    from tests.e2e.test_session_line import planrun, read_until

    if os.geteuid() == 0:
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, 4321, 4321, follow_symlinks=False)
    head = git(repo, "rev-parse", "HEAD")
    with FakeMessagesAPI(session_script) as api:
        process = planrun(api, "--repo", str(repo), home=planrun_home)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("commit the work\n")
        process.stdin.flush()
        seen = read_until(process.stdout, "approve? start MCP server 'git'")
        process.stdin.write("y\n")
        process.stdin.flush()
        seen += read_until(process.stdout, "approve? start MCP server 'time'")
        process.stdin.write("n\n")
        process.stdin.flush()
        seen += read_until(process.stdout, "approve? call mcp__git__git_commit")
        out, err = process.communicate("n not in this session\n/mcp\n", 180)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    out = seen + out
    assert "MCP server 'time' of" in out and "not approved, so it was not started" in out
    results = [
        block
        for request in api.message_requests
        for block in request.body["messages"][-1]["content"]
        if block.get("type") == "tool_result"
    ]
    assert (
        "Not approved" in results[0]["content"] and "not in this session" in results[0]["content"]
    )
    assert "mcp__git__git_log  read-only" in out
    assert "mcp__git__git_commit  asks; not in plan mode" in out
    assert git(repo, "rev-parse", "HEAD") == head
    approvals = json.loads((planrun_home / "mcp-approvals.json").read_text())
    assert list(approvals[str(repo.resolve())]) == ["git"]
    left = docker_client.containers.list(all=True, filters={"label": "io.planrun.agent=mcp-git"})
    assert left == []


def test_ctrl_c_removes_the_server_containers(
    repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    import signal
    import sys
    import time

    from sandbox_runner.mcp.approvals import Approvals
    from sandbox_runner.mcp.servers import load_servers

    Approvals().approve(repo, load_servers(repo, {}).get("git"))
    looking = message(tool_use("mcp__git__git_log", {"repo_path": "/workspace"}))
    script = PerspectiveScript({"plan": [looking] * 20}, delays={"plan": 1.0})
    out = tmp_path / "out"
    with FakeMessagesAPI(script) as server:
        env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="k")
        command = [sys.executable, "-m", "sandbox_runner", "plan", "x", "--repo", str(repo)]
        process = subprocess.Popen(
            [*command, "--out", str(out)], env=env, stderr=subprocess.PIPE, text=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip

        def mine() -> list[Any]:
            listed = docker_client.containers.list(
                all=True, filters={"label": f"io.planrun.pid={process.pid}"}
            )
            return [c for c in listed if c.labels.get("io.planrun.agent") == "mcp-git"]

        deadline = time.monotonic() + 90
        while not (out / "plan.transcript.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert mine(), "the git server runs while the plan does"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert mine() == []


def test_one_plan_reads_through_mcp_and_the_web_refuses_a_write_and_changes_nothing(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    """The whole of research beyond the repository in one plan-mode run: a `.mcp.json`
    server's read tool and a WebFetch used, its write tool refused, the repository as it
    was."""
    from tests.support.web_server import WebServer, page

    agent = repo / ".claude" / "agents" / "researcher.md"
    agent.write_text(RESEARCHER.replace("tools: Read,", "tools: Read, WebFetch,"))
    git(repo, "commit", "-qam", "the researcher may read the web")
    runner = CliRunner()
    assert runner.invoke(cli, ["mcp", "approve", "git", "--repo", str(repo)]).exit_code == 0
    docs = "<html><body><h1>Flags</h1><p>Pass <code>--loud</code> to shout.</p></body></html>"
    with WebServer({"/flags": page(docs)}) as server:
        api.script = PerspectiveScript(
            {
                "plan": [
                    message(tool_use("mcp__git__git_log", {"repo_path": "/workspace"})),
                    message(tool_use("WebFetch", {"url": server.url("/flags"), "prompt": "?"})),
                    message(
                        tool_use(
                            "mcp__git__git_commit", {"repo_path": "/workspace", "message": "x"}
                        )
                    ),
                    message(
                        tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})
                    ),
                    message(text("The plan is written.")),
                ]
            }
        )
        head, out = git(repo, "rev-parse", "HEAD"), tmp_path / "out"
        result = runner.invoke(
            cli,
            ["plan", "Add a flag", "--repo", str(repo), "--agent", "researcher",
             "--out", str(out), "--allow-web", "127.0.0.1"],
            catch_exceptions=False,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = results_by_tool(out / "plan.transcript.jsonl")
    assert "the researcher may read the web" in results["mcp__git__git_log"]["content"]
    fetched = results["WebFetch"]
    assert not fetched["is_error"] and "--loud" in fetched["content"]
    assert results["mcp__git__git_commit"]["is_error"]
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""
