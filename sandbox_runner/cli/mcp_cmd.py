"""`planrun mcp`: the MCP servers of a repository, their approval and their tools."""

from __future__ import annotations

from pathlib import Path

import click

from sandbox_runner.cli.options import examples, mcp_options, repo_option
from sandbox_runner.cli.services import reports_errors, services, warn
from sandbox_runner.config import load_settings
from sandbox_runner.mcp.approvals import Approvals
from sandbox_runner.mcp.launch import McpChoice, open_hub
from sandbox_runner.mcp.servers import ServerDefinition, ServerList, load_servers
from sandbox_runner.safe_text import one_line

REPO_HELP = "The repository whose servers (.mcp.json) to use."


@click.group(
    short_help="List, approve and revoke MCP servers.",
    epilog=examples("planrun mcp list", "planrun mcp approve git"),
)
def mcp() -> None:
    """MCP servers: yours (mcp_servers in ~/.planrun/config.yaml) and the repository's
    (.mcp.json), which start only once you approve them."""


@mcp.command("list", epilog=examples("planrun mcp list", "planrun mcp list --no-start"))
@repo_option(REPO_HELP)
@mcp_options
@click.option("--no-start", is_flag=True, help="Do not start the servers to list their tools.")
@click.pass_context
@reports_errors
def mcp_list(
    ctx: click.Context, repo: str, mcp_config: Path | None, strict_mcp_config: bool, no_start: bool
) -> None:
    """List the servers, where each comes from, whether it is approved, and (starting each
    approved one briefly) its tools, marking those offered in plan mode."""
    workspace = Path(repo).expanduser().resolve()
    loaded = load_settings(workspace)
    choice = McpChoice(mcp_config, strict_mcp_config)
    servers = _servers(workspace, loaded.settings.mcp_servers, choice)
    if not servers.servers:
        click.echo("no MCP servers (see docs/mcp.md to add one)")
        return
    approvals = Approvals()
    for server in servers.servers:
        state = "approved" if approvals.approved(workspace, server) else "not approved"
        if not server.needs_approval:
            state = "yours"
        click.echo(one_line(f"{server.name}  {server.source}  {state}  {server.describe()}"))
    if no_start:
        return
    host = services(ctx)
    hub = open_hub(
        workspace, loaded, host.sandboxes(workspace, loaded), choice=choice,
        session="mcp-list", progress=host.progress,
    )  # fmt: skip
    if hub is None:
        return
    try:
        for tool in hub.tools:
            mark = "read-only" if tool.annotated else "read-only (your list)"
            if not tool.read_only:
                mark = "asks (not in plan mode)"
            click.echo(one_line(f"  {tool.spec.name}  {mark}"))
        for note in hub.notes:
            warn(note)
    finally:
        hub.stop()


@mcp.command(
    "approve", epilog=examples("planrun mcp approve git", "planrun mcp approve git --repo ../api")
)
@click.argument("name")
@repo_option(REPO_HELP)
@reports_errors
def mcp_approve(name: str, repo: str) -> None:
    """Approve the repository's server NAME, as it is defined now (a changed definition
    needs approving again)."""
    workspace, server = _repository_server(name, repo)
    Approvals().approve(workspace, server)
    click.echo(one_line(f"approved {name} for {workspace}: it runs {server.describe()}"))


@mcp.command("revoke", epilog=examples("planrun mcp revoke git"))
@click.argument("name")
@repo_option(REPO_HELP)
@reports_errors
def mcp_revoke(name: str, repo: str) -> None:
    """Forget the approval of the repository's server NAME: it no longer starts."""
    workspace = Path(repo).expanduser().resolve()
    if Approvals().revoke(workspace, name):
        click.echo(one_line(f"revoked {name} for {workspace}"))
    else:
        raise click.ClickException(one_line(f"{name} is not approved for {workspace}"))


def _servers(workspace: Path, entries: dict[str, object], choice: McpChoice) -> ServerList:
    servers = load_servers(workspace, entries, config_file=choice.config_file, strict=choice.strict)
    for note in servers.notes:
        warn(note)
    return servers


def _repository_server(name: str, repo: str) -> tuple[Path, ServerDefinition]:
    workspace = Path(repo).expanduser().resolve()
    loaded = load_settings(workspace)
    server = _servers(workspace, loaded.settings.mcp_servers, McpChoice()).get(name)
    if not server.needs_approval:
        raise click.ClickException(
            one_line(f"{name} is defined in {server.origin}, which is yours: it needs no approval")
        )
    return workspace, server
