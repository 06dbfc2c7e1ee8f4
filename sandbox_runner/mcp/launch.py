"""The MCP servers of a workspace started for a run or a session: loaded from the user's
config, the repository's `.mcp.json` and a `--mcp-config` file, each stdio server in a
container the workspace's sandbox factory makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_runner.config import LoadedSettings
from sandbox_runner.mcp.servers import ServerDefinition, load_servers

if TYPE_CHECKING:
    from sandbox_runner.mcp.hub import Asker, Containers, McpHub, ServerContainer
    from sandbox_runner.sandbox.factory import DockerSandboxes


@dataclass(frozen=True)
class McpChoice:
    """What the command line says of MCP servers."""

    config_file: Path | None = None
    """`--mcp-config FILE`: servers of a file (Claude Code's format), yours to run."""
    strict: bool = False
    """`--strict-mcp-config`: only that file's servers."""


def open_hub(
    workspace: Path,
    loaded: LoadedSettings,
    sandboxes: DockerSandboxes,
    *,
    choice: McpChoice,
    session: str,
    progress: Callable[[str], None],
    ask: Asker | None = None,
) -> McpHub | None:
    """Start the servers that may start (approved, granted) and list their tools; None
    when the workspace has no server at all. The hub's notes say what did not start.

    Raises:
        ConfigError: the user's config or the --mcp-config file is invalid.
    """
    servers = load_servers(
        workspace, loaded.settings.mcp_servers, config_file=choice.config_file,
        strict=choice.strict,
    )  # fmt: skip
    if not servers.servers and not servers.notes:
        return None
    # Here: the SDK takes a moment to import, and most workspaces have no server.
    from sandbox_runner.mcp.hub import McpHub

    hub = McpHub(
        servers, workspace, containers=containers_for(sandboxes, loaded.settings.mcp_image, session)
    )
    hub.start(progress, ask)
    return hub


def containers_for(sandboxes: DockerSandboxes, mcp_image: str | None, session: str) -> Containers:
    """A server's container: its own image if the user named one, else `mcp_image`,
    else the sandbox image."""

    def make(server: ServerDefinition) -> ServerContainer:
        return sandboxes.mcp_server(
            server.name,
            (server.command, *server.args),
            env=server.env,
            network=server.grants.network,
            image=server.grants.image or mcp_image,
            session=session,
        )

    return make
