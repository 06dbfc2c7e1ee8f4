"""MCP server definitions: the repository's .mcp.json, the user's config, a --mcp-config
file; host environment only for the user's own; approvals per definition hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox_runner.config import load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.mcp.approvals import Approvals
from sandbox_runner.mcp.servers import load_servers

SECRET = "s3cr3t-host-value"


def write_mcp_json(repo: Path, servers: dict[str, object]) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    path = repo / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_a_repository_server_is_read_in_claude_codes_format(tmp_path: Path) -> None:
    write_mcp_json(
        tmp_path,
        {
            "git": {"command": "mcp-server-git", "args": ["--repository", "."], "env": {"A": "1"}},
            "docs": {"type": "sse", "url": "https://docs.example/sse", "headers": {"X": "y"}},
        },
    )
    servers = load_servers(tmp_path, {})
    git, docs = servers.get("git"), servers.get("docs")
    assert (git.source, git.transport, git.command, git.args) == (
        "repository", "stdio", "mcp-server-git", ("--repository", "."),
    )  # fmt: skip
    assert dict(git.env) == {"A": "1"} and git.needs_approval
    assert (docs.transport, docs.url, dict(docs.headers)) == (
        "sse",
        "https://docs.example/sse",
        {"X": "y"},
    )


def test_a_repository_server_never_reads_the_hosts_environment(tmp_path: Path) -> None:
    write_mcp_json(
        tmp_path,
        {"leak": {"command": "srv", "args": ["--token=${SECRET_X}"], "env": {"T": "${SECRET_X}"}}},
    )
    server = load_servers(tmp_path, {}, env={"SECRET_X": SECRET}).get("leak")
    assert SECRET not in json.dumps([server.args, dict(server.env)])
    assert server.args == ("--token=${SECRET_X}",) and server.env["T"] == "${SECRET_X}"


def test_the_users_own_server_expands_variables_with_defaults(tmp_path: Path) -> None:
    entries = {"gh": {"command": "srv", "env": {"T": "${TOKEN}", "U": "${MISSING:-fallback}"}}}
    server = load_servers(tmp_path, entries, env={"TOKEN": "abc"}).get("gh")
    assert dict(server.env) == {"T": "abc", "U": "fallback"} and not server.needs_approval
    with pytest.raises(ConfigError, match="environment variable NOPE is not set"):
        load_servers(tmp_path, {"gh": {"command": "srv", "args": ["${NOPE}"]}}, env={})


def test_the_users_definition_wins_a_name_and_a_grant_only_entry_grants(tmp_path: Path) -> None:
    write_mcp_json(tmp_path, {"git": {"command": "evil"}, "time": {"command": "mcp-server-time"}})
    entries = {
        "git": {"command": "mcp-server-git"},
        "time": {"read_only_tools": ["x"], "network": True, "timeout": 5},
    }
    servers = load_servers(tmp_path, entries)
    assert servers.get("git").command == "mcp-server-git"
    assert any("defined in your config too" in note for note in servers.notes)
    time = servers.get("time")
    assert time.source == "repository" and time.grants.network
    assert time.grants.read_only_tools == {"x"} and time.grants.timeout == 5


def test_strict_uses_only_the_config_file(tmp_path: Path) -> None:
    write_mcp_json(tmp_path / "repo", {"repo-server": {"command": "a"}})
    ci = write_mcp_json(tmp_path / "ci", {"ci-server": {"command": "b"}})
    entries = {"mine": {"command": "c"}}
    names = [s.name for s in load_servers(tmp_path / "repo", entries, config_file=ci).servers]
    assert sorted(names) == ["ci-server", "mine", "repo-server"]
    strict = load_servers(tmp_path / "repo", entries, config_file=ci, strict=True)
    assert [(s.name, s.source) for s in strict.servers] == [("ci-server", "file")]


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ({"a__b": {"command": "x"}}, "a server name is"),
        ({"a": {"command": 1}}, "command must be"),
        ({"a": {"type": "ws", "url": "x"}}, "type must be"),
        ({"a": {"url": "file:///etc/passwd"}}, "url must start"),
    ],
)
def test_a_bad_repository_file_is_a_note_not_a_failure(
    tmp_path: Path, servers: dict[str, object], problem: str
) -> None:
    write_mcp_json(tmp_path, servers)
    found = load_servers(tmp_path, {})
    assert found.servers == ()
    [note] = found.notes
    assert problem in note and "not used" in note


def test_a_project_config_cannot_define_mcp_servers(tmp_path: Path) -> None:
    (tmp_path / ".planrun").mkdir()
    (tmp_path / ".planrun" / "config.yaml").write_text("mcp_servers: {x: {command: y}}\n")
    with pytest.raises(ConfigError, match="cannot set 'mcp_servers'"):
        load_settings(tmp_path, home=tmp_path / "home")


def test_an_approval_holds_for_one_definition_and_can_be_revoked(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_mcp_json(repo, {"git": {"command": "mcp-server-git"}})
    approvals = Approvals(tmp_path / "home" / "mcp-approvals.json")
    server = load_servers(repo, {}).get("git")
    assert not approvals.approved(repo, server)
    approvals.approve(repo, server)
    assert Approvals(approvals.path).approved(repo, server)
    assert not approvals.approved(tmp_path / "other", server)
    # The repository changes what the server runs: it must be approved again.
    write_mcp_json(repo, {"git": {"command": "mcp-server-git", "args": ["--evil"]}})
    assert not approvals.approved(repo, load_servers(repo, {}).get("git"))
    assert approvals.revoke(repo, "git") and not approvals.revoke(repo, "git")
    assert not approvals.approved(repo, server)
    assert not (repo / "mcp-approvals.json").exists()


def test_a_mcp_json_that_links_out_of_the_repository_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "host-secrets.json"
    outside.write_text(json.dumps({"mcpServers": {"x": {"command": "cat"}}}))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".mcp.json").symlink_to(outside)
    found = load_servers(repo, {})
    assert found.servers == ()
    [note] = found.notes
    assert "cannot read it" in note and "not used" in note
