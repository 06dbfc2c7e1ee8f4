"""The user's approvals of repositories' MCP servers, kept in planrun's state (never in the
repository): one per repository and server name, valid for one definition's hash."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sandbox_runner.errors import ConfigError
from sandbox_runner.mcp.servers import ServerDefinition
from sandbox_runner.paths import planrun_home

APPROVALS_FILE = "mcp-approvals.json"


class Approvals:
    """Approved repository servers: `{repository: {server: definition hash}}` in a file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or planrun_home() / APPROVALS_FILE

    def approved(self, workspace: Path, server: ServerDefinition) -> bool:
        """Whether the user approved this definition of the server for this repository."""
        if not server.needs_approval:
            return True
        return self._load().get(_key(workspace), {}).get(server.name) == server.digest()

    def approve(self, workspace: Path, server: ServerDefinition) -> None:
        """Remember that the user approved SERVER, as it is defined now, for WORKSPACE."""
        data = self._load()
        data.setdefault(_key(workspace), {})[server.name] = server.digest()
        self._save(data)

    def revoke(self, workspace: Path, name: str) -> bool:
        """Forget an approval; False when there was none."""
        data = self._load()
        servers = data.get(_key(workspace), {})
        if name not in servers:
            return False
        del servers[name]
        if not servers:
            del data[_key(workspace)]
        self._save(data)
        return True

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise ConfigError(f"{self.path}: cannot read the MCP approvals: {error}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{self.path}: the MCP approvals are not a JSON object")
        return {
            str(repo): {str(k): str(v) for k, v in servers.items()}
            for repo, servers in data.items()
            if isinstance(servers, dict)
        }

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(partial, self.path)


def _key(workspace: Path) -> str:
    return str(workspace.expanduser().resolve())
