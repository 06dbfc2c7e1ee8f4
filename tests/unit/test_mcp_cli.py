"""`planrun mcp`: listing without starting, approving and revoking a repository's server,
each mistake one line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sandbox_runner.cli import cli


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["mcp", *args])
    return result.exit_code, result.stdout, result.stderr


def test_approve_list_and_revoke_a_repository_server(tmp_path: Path, planrun_home: Path) -> None:
    servers = {"git": {"command": "mcp-server-git"}}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (planrun_home / "config.yaml").write_text("mcp_servers:\n  mine: {command: srv}\n")
    repo = str(tmp_path)
    code, out, _ = run("list", "--no-start", "--repo", repo)
    assert code == 0
    assert "git  repository  not approved  mcp-server-git" in out
    assert "mine  user  yours  srv" in out
    assert run("approve", "git", "--repo", repo)[:2] == (
        0, f"approved git for {tmp_path.resolve()}: it runs mcp-server-git\n",
    )  # fmt: skip
    assert "git  repository  approved" in run("list", "--no-start", "--repo", repo)[1]
    assert run("revoke", "git", "--repo", repo)[0] == 0
    assert "not approved" in run("list", "--no-start", "--repo", repo)[1]
    code, _, err = run("revoke", "git", "--repo", repo)
    assert code == 1 and "git is not approved for" in err


def test_mistakes_are_one_line(tmp_path: Path, planrun_home: Path) -> None:
    (planrun_home / "config.yaml").write_text("mcp_servers:\n  mine: {command: srv}\n")
    code, _, err = run("approve", "nope", "--repo", str(tmp_path))
    assert code == 2 and "no MCP server called 'nope' (servers: mine)" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run("approve", "mine", "--repo", str(tmp_path))
    assert code == 1 and "which is yours: it needs no approval" in err
    (planrun_home / "config.yaml").write_text("mcp_servers: [1]\n")
    code, _, err = run("list", "--repo", str(tmp_path))
    assert code == 2 and "mcp_servers" in err and len(err.strip().splitlines()) == 1


def test_mcp_config_and_strict_choose_the_servers_listed(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"git": {"command": "g"}}}))
    ci = tmp_path / "ci.json"
    ci.write_text(json.dumps({"mcpServers": {"ci-time": {"command": "t"}}}))
    both = run("list", "--no-start", "--repo", str(repo), "--mcp-config", str(ci))[1]
    assert "ci-time  file  yours  t" in both and "git  repository" in both
    strict = ["--mcp-config", str(ci), "--strict-mcp-config"]
    only = run("list", "--no-start", "--repo", str(repo), *strict)[1]
    assert "ci-time" in only and "git" not in only
