"""MCP servers in their containers, for real: the reference servers from PyPI
(mcp-server-git, mcp-server-time) in a test image derived from the sandbox image; servers
that hang, crash or flood; an unapproved repository server; the host's environment."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.config import load_settings
from sandbox_runner.mcp.approvals import Approvals
from sandbox_runner.mcp.hub import McpHub
from sandbox_runner.mcp.launch import McpChoice, open_hub
from sandbox_runner.mcp.servers import load_servers
from sandbox_runner.sandbox.docker_provider import DockerProvider
from sandbox_runner.sandbox.factory import DockerSandboxes
from sandbox_runner.types import ToolCall
from tests.conftest import make_sample_repo
from tests.support.mcp_image import mcp_image

SECRET = "host-secret-7f3a"


@pytest.fixture(scope="session")
def server_image(sandbox_image: str) -> str:
    return mcp_image(sandbox_image)


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    root = make_sample_repo(tmp_path / "repo")
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "first commit"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@e", *command], cwd=root, check=True
        )
    return root


@pytest.fixture
def start(
    git_repo: Path, planrun_home: Path, server_image: str, docker_client: Any, test_session: str
) -> Iterator[Any]:
    """Start the servers of a user config (YAML text) on the repository; stopped after."""
    hubs: list[McpHub] = []

    def run(config: str, choice: McpChoice | None = None) -> McpHub:
        (planrun_home / "config.yaml").write_text(f"mcp_image: {server_image}\n{config}")
        loaded = load_settings(git_repo, home=planrun_home)
        sandboxes = DockerSandboxes(lambda: DockerProvider(docker_client), git_repo, loaded)
        hub = open_hub(
            git_repo, loaded, sandboxes, choice=choice or McpChoice(), session=test_session,
            progress=lambda text: None,
        )  # fmt: skip
        assert hub is not None
        hubs.append(hub)
        return hub

    yield run
    for hub in hubs:
        hub.stop()


def containers(docker_client: Any, session: str) -> list[Any]:
    found: list[Any] = docker_client.containers.list(
        all=True, filters={"label": f"io.planrun.session={session}"}
    )
    return found


def test_the_git_server_reads_and_cannot_write_even_when_listed_as_read_only(
    start: Any, git_repo: Path
) -> None:
    head = (git_repo / ".git" / "HEAD").read_text()
    hub = start(
        "mcp_servers:\n  git:\n    command: mcp-server-git\n"
        "    args: [--repository, /workspace]\n    read_only_tools: [git_add]\n"
    )
    tools = {tool.name: tool for tool in hub.tools}
    # The server annotates its tools: git_log reads, git_commit does not.
    assert tools["git_log"].read_only and tools["git_log"].annotated
    assert not tools["git_commit"].read_only
    # The user's list makes git_add "read-only" (offered in plan mode): the mount holds.
    assert tools["git_add"].read_only and not tools["git_add"].annotated
    log = hub.call(ToolCall("1", "mcp__git__git_log", {"repo_path": "/workspace"}))
    assert not log.is_error and "first commit" in log.content
    (git_repo / "new.txt").write_text("x")
    add = hub.call(
        ToolCall("2", "mcp__git__git_add", {"repo_path": "/workspace", "files": ["new.txt"]})
    )
    assert add.is_error and "Read-only file system" in add.content
    offer = hub.offer(lambda server, tool: True, read_only=True)
    offered = {spec.name for spec in offer.specs}
    assert "mcp__git__git_log" in offered and "mcp__git__git_commit" not in offered
    assert "mcp__git__git_commit" in offer.names
    assert (git_repo / ".git" / "HEAD").read_text() == head
    assert not (git_repo / ".git" / "index.lock").exists()


def test_the_container_is_hardened_and_gets_no_host_environment(
    start: Any, git_repo: Path, docker_client: Any, test_session: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SECRET_X", SECRET)
    (git_repo / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": "mcp-server-time",
                        "args": ["--local-timezone=UTC"],
                        "env": {"LEAK": "${SECRET_X}", "PLAIN": "1"},
                    }
                }
            }
        )
    )
    Approvals().approve(git_repo, load_servers(git_repo, {}).get("time"))
    hub = start(
        "mcp_servers:\n  mine:\n    command: mcp-server-time\n    env: {MINE: '${SECRET_X}'}\n"
    )
    assert {tool.server for tool in hub.tools} == {"time", "mine"}
    answer = hub.call(ToolCall("1", "mcp__time__get_current_time", {"timezone": "UTC"}))
    assert not answer.is_error and "UTC" in answer.content
    found = {c.labels["io.planrun.agent"]: c for c in containers(docker_client, test_session)}
    repository, mine = found["mcp-time"].attrs, found["mcp-mine"].attrs
    config, host = repository["Config"], repository["HostConfig"]
    assert SECRET not in json.dumps(config)
    assert "LEAK=${SECRET_X}" in config["Env"] and "PLAIN=1" in config["Env"]
    assert not any(name.startswith("ANTHROPIC") for name in config["Env"])
    # The user's own server may read the host's environment (its config says so).
    assert f"MINE={SECRET}" in mine["Config"]["Env"]
    assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
    assert host["NetworkMode"] == "none"
    assert any("no-new-privileges" in option for option in host["SecurityOpt"])
    workspace = next(m for m in repository["Mounts"] if m["Destination"] == "/workspace")
    assert workspace["RW"] is False


def test_an_unapproved_repository_server_never_starts(
    start: Any, git_repo: Path, docker_client: Any, test_session: str
) -> None:
    (git_repo / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"git": {"command": "mcp-server-git"}}})
    )
    hub = start("")
    assert hub.tools == [] and containers(docker_client, test_session) == []
    [note] = hub.notes
    assert "'git'" in note and "not approved" in note and "planrun mcp approve git" in note


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("command: sleep\n    args: ['600']\n    startup_timeout: 3", "did not start within 3 s"),
        (
            "command: sh\n    args: [-c, 'echo broken config >&2; exit 3']",
            "exited with code 3; its last error output: broken config",
        ),
        ("command: 'yes'", "lines that are not MCP messages"),
        ("command: sh\n    args: [-c, 'head -c 9000000 /dev/zero']", "MiB in one message"),
    ],
    ids=["hangs", "crashes", "floods-lines", "floods-one-line"],
)
def test_a_bad_server_is_one_clear_line_and_leaves_no_container(
    start: Any, docker_client: Any, test_session: str, entry: str, expected: str
) -> None:
    hub = start(f"mcp_servers:\n  bad:\n    {entry}\n")
    assert hub.tools == []
    [note] = hub.notes
    assert note.startswith("MCP server 'bad' did not start: ") and expected in note, note
    assert containers(docker_client, test_session) == []


def test_a_server_that_dies_mid_session_is_a_clear_tool_error(
    start: Any, docker_client: Any, test_session: str
) -> None:
    hub = start("mcp_servers:\n  git:\n    command: mcp-server-git\n")
    [container] = containers(docker_client, test_session)
    container.kill()
    answer = hub.call(ToolCall("1", "mcp__git__git_log", {"repo_path": "/workspace"}))
    assert answer.is_error and "MCP server 'git'" in answer.content
    assert "stopped" in answer.content or "not running" in answer.content, answer.content
    assert containers(docker_client, test_session) == []


def test_a_repository_that_makes_a_call_hang_stops_the_server(
    start: Any, git_repo: Path, docker_client: Any, test_session: str
) -> None:
    # A nested "repository" whose HEAD is a FIFO: git_log on it blocks for good.
    trap = git_repo / "trap" / ".git"
    (trap / "refs").mkdir(parents=True)
    (trap / "objects").mkdir()
    os.mkfifo(trap / "HEAD")
    hub = start("mcp_servers:\n  git:\n    command: mcp-server-git\n    timeout: 3\n")
    hung = hub.call(ToolCall("1", "mcp__git__git_log", {"repo_path": "/workspace/trap"}))
    assert hung.is_error and "did not answer git_log within 3 s" in hung.content
    after = hub.call(ToolCall("2", "mcp__git__git_log", {"repo_path": "/workspace"}))
    assert (
        after.is_error and "planrun stopped MCP server 'git': it hung on git_log" in after.content
    )
    assert "mcp__git__git_log" not in {
        spec.name for spec in hub.offer(lambda s, t: True, read_only=True).specs
    }
    assert containers(docker_client, test_session) == []


def test_mcp_list_starts_each_server_briefly_to_show_its_tools(
    git_repo: Path, planrun_home: Path, server_image: str, docker_client: Any
) -> None:
    from click.testing import CliRunner

    from sandbox_runner.cli import cli

    (planrun_home / "config.yaml").write_text(
        f"mcp_image: {server_image}\nmcp_servers:\n  git: {{command: mcp-server-git}}\n"
    )
    result = CliRunner().invoke(cli, ["mcp", "list", "--repo", str(git_repo)])
    assert result.exit_code == 0, result.output
    assert "git  user  yours  mcp-server-git" in result.stdout
    assert "  mcp__git__git_log  read-only" in result.stdout
    assert "  mcp__git__git_commit  asks (not in plan mode)" in result.stdout
    assert "starting MCP server git" in result.stderr
    left = docker_client.containers.list(all=True, filters={"label": "io.planrun.agent=mcp-git"})
    assert left == []
