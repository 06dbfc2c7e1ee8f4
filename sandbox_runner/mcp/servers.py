"""Where MCP servers are defined (the repository's `.mcp.json`, the user's config, a
`--mcp-config` file) and what one definition says: how to start or reach it, and what the
user granted it."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_io import UnsafeFileError, read_beneath, read_untrusted_bytes

REPOSITORY_FILE = ".mcp.json"
MAX_FILE_BYTES = 256 * 1024
DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds a tool call may take, unless the user's entry sets `timeout`."""
DEFAULT_STARTUP_TIMEOUT = 30.0
"""Seconds a server has to start, answer `initialize` and list its tools."""
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,47}")
"""A server name: no `_` run of two, so that `mcp__<server>__<tool>` splits one way."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Source = Literal["repository", "user", "file"]
Transport = Literal["stdio", "http", "sse"]


@dataclass(frozen=True)
class Grants:
    """What the user's config grants a server of a name (the repository cannot)."""

    network: bool = False
    """A stdio server's container may reach the network; a repository's remote server
    may be reached at all."""
    read_only_tools: frozenset[str] = frozenset()
    """Tools the user says only read, offered in plan mode whatever the server says."""
    image: str | None = None
    """The image its container runs (default: the `mcp_image` setting, else the sandbox's)."""
    timeout: float = DEFAULT_CALL_TIMEOUT
    """Seconds one tool call may take."""
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    """Seconds it has to start and list its tools."""


@dataclass(frozen=True)
class ServerDefinition:
    """One MCP server: how to start or reach it, where it was defined, what it is granted."""

    name: str
    source: Source
    origin: str
    """The file that defined it."""
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    grants: Grants = field(default_factory=Grants)

    @property
    def needs_approval(self) -> bool:
        """A repository's server starts only once the user approved this very definition."""
        return self.source == "repository"

    def digest(self) -> str:
        """A hash of what the server runs or reaches: an approval holds for this only."""
        what = {
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": dict(sorted(self.env.items())),
            "url": self.url,
            "headers": dict(sorted(self.headers.items())),
        }
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]

    def describe(self) -> str:
        """What it runs or reaches, in one line."""
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return f"{self.transport} {self.url}"


@dataclass(frozen=True)
class ServerList:
    """The servers of a workspace, with the problems found reading their definitions."""

    servers: tuple[ServerDefinition, ...]
    notes: tuple[str, ...] = ()

    def get(self, name: str) -> ServerDefinition:
        """The server called NAME.

        Raises:
            ConfigError: no server has that name; the message lists the names.
        """
        for server in self.servers:
            if server.name == name:
                return server
        known = ", ".join(server.name for server in self.servers) or "none"
        raise ConfigError(f"no MCP server called {name!r} (servers: {known})")


def load_servers(
    workspace: Path | None,
    user_entries: Mapping[str, Any],
    *,
    config_file: Path | None = None,
    strict: bool = False,
    env: Mapping[str, str] | None = None,
) -> ServerList:
    """The servers of WORKSPACE: the user's config, then the repository's `.mcp.json`
    (a name the user defines stays the user's), or only CONFIG_FILE's when STRICT.

    Raises:
        ConfigError: the user's config or CONFIG_FILE is invalid (a repository's file
            is only reported, in the notes).
    """
    env = os.environ if env is None else env
    grants = {name: _grants(name, entry) for name, entry in user_entries.items()}
    found: dict[str, ServerDefinition] = {}
    notes: list[str] = []
    if config_file is not None:
        data = _read_json(config_file, beneath=None)
        for name, entry in _server_entries(data, str(config_file)).items():
            found[name] = _definition(name, entry, "file", str(config_file), grants, env)
    if not strict:
        for name, entry in user_entries.items():
            if _defines_server(entry) and name not in found:
                found[name] = _definition(name, entry, "user", "user config", grants, env)
        if workspace is not None:
            notes += _add_repository(workspace, found, grants, env)
    return ServerList(tuple(found.values()), tuple(notes))


def _add_repository(
    workspace: Path,
    found: dict[str, ServerDefinition],
    grants: Mapping[str, Grants],
    env: Mapping[str, str],
) -> list[str]:
    path = workspace / REPOSITORY_FILE
    if not os.path.lexists(path):
        return []
    try:
        entries = _server_entries(_read_json(path, beneath=workspace), str(path))
        notes = []
        for name, entry in entries.items():
            if name in found:
                notes.append(
                    f"{path}: server {name!r} is defined in your config too; yours is used"
                )
                continue
            found[name] = _definition(name, entry, "repository", str(path), grants, env)
        return notes
    except ConfigError as error:
        return [f"{error}; the repository's MCP servers are not used"]


def _read_json(path: Path, *, beneath: Path | None) -> Any:
    try:
        if beneath is None:
            raw = read_untrusted_bytes(path, MAX_FILE_BYTES)
        else:
            raw = read_beneath(beneath, path, MAX_FILE_BYTES)
        if raw is None:
            raise ConfigError(f"{path}: no such file")
        return json.loads(raw.decode("utf-8"))
    except (UnsafeFileError, OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it: {error}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: invalid JSON at line {error.lineno}: {error.msg}") from None


def _server_entries(data: Any, where: str) -> dict[str, Any]:
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: expected a JSON object with an 'mcpServers' mapping")
    return servers


def _defines_server(entry: Any) -> bool:
    """A user entry with a command or url defines a server; one without only grants
    something to the repository's server of that name."""
    return isinstance(entry, dict) and ("command" in entry or "url" in entry)


def _definition(
    name: str,
    entry: Any,
    source: Source,
    origin: str,
    grants: Mapping[str, Grants],
    env: Mapping[str, str],
) -> ServerDefinition:
    where = f"{origin}: server {name!r}"
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(f"{where}: a server name is letters, digits and '-' (at most 48, no '_')")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a mapping (command/args/env, or type/url)")
    # Only the user's own definitions may read the host's environment: a repository's
    # `${GITHUB_TOKEN}` would carry the user's secret into a stranger's server.
    expand = (lambda text: text) if source == "repository" else (lambda text: _expand(text, env))
    kind = entry.get("type", "stdio" if "command" in entry else "http")
    if kind not in ("stdio", "http", "sse"):
        raise ConfigError(f"{where}: type must be stdio, http or sse, not {kind!r}")
    if kind == "stdio":
        command = _string(entry.get("command"), f"{where}: command")
        args = tuple(expand(_string(arg, f"{where}: args")) for arg in entry.get("args") or [])
        return ServerDefinition(
            name, source, origin, "stdio", expand(command), args,
            env=_mapping(entry.get("env"), f"{where}: env", expand),
            grants=grants.get(name, Grants()),
        )  # fmt: skip
    url = expand(_string(entry.get("url"), f"{where}: url"))
    if not url.startswith(("https://", "http://")):
        raise ConfigError(f"{where}: url must start with https:// or http://")
    headers = _mapping(entry.get("headers"), f"{where}: headers", expand)
    return ServerDefinition(
        name, source, origin, kind, url=url, headers=headers, grants=grants.get(name, Grants())
    )


def _grants(name: str, entry: Any) -> Grants:
    where = f"user config: mcp_servers: {name!r}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a mapping")
    network = entry.get("network", False)
    if not isinstance(network, bool):
        raise ConfigError(f"{where}: network must be true or false")
    tools = entry.get("read_only_tools") or []
    if not isinstance(tools, list) or not all(isinstance(tool, str) for tool in tools):
        raise ConfigError(f"{where}: read_only_tools must be a list of tool names")
    image = entry.get("image")
    if image is not None and not isinstance(image, str):
        raise ConfigError(f"{where}: image must be an image tag")
    timeout = _seconds(entry, "timeout", DEFAULT_CALL_TIMEOUT, where)
    startup = _seconds(entry, "startup_timeout", DEFAULT_STARTUP_TIMEOUT, where)
    return Grants(network, frozenset(tools), image, timeout, startup)


def _seconds(entry: dict[str, Any], key: str, default: float, where: str) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
        raise ConfigError(f"{where}: {key} must be a number of seconds, at least 1")
    return float(value)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ConfigError(f"{where} must be a non-empty string")
    return value


def _mapping(value: Any, where: str, expand: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items()
    ):
        raise ConfigError(f"{where} must be a mapping of strings to strings")
    return {key: expand(item) for key, item in value.items()}


def _expand(text: str, env: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` from the host's environment, as Claude Code does."""

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(f"environment variable {name} is not set (named as ${{{name}}})")

    return _VARIABLE.sub(value, text)
