"""Translating a tool call: the tool offered, its input valid, its paths normalised to
container paths, and the sandbox request it becomes. Whether it may run is decided in
tools/permissions.py."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sandbox_runner.input_depth import removed_input
from sandbox_runner.paths import EXTRA_MOUNT_ROOT, PLAN_MOUNT, WORKSPACE_MOUNT
from sandbox_runner.tools.schemas import (
    ALL_TOOLS,
    DEFAULT_BASH_TIMEOUT_MS,
    HOST_TOOLS,
    MAX_BASH_TIMEOUT_MS,
    validate_input,
)
from sandbox_runner.types import ToolCall, ToolRequest

FILE_TOOLS = {"Read": "file_path", "Write": "file_path", "Edit": "file_path", "LSP": "file_path"}
DIRECTORY_TOOLS = {"Glob": "path", "Grep": "path", "LS": "path"}
WRITING_TOOLS = frozenset({"Write", "Edit", "NotebookEdit"})
PATH_REQUIRED = frozenset({"Read", "Write", "Edit"})


class ToolKind(StrEnum):
    """What a call does, which is what its permission depends on."""

    READ = "read"
    EDIT = "edit"
    COMMAND = "command"
    HOST = "host"
    """Answered by the host (Task, ExitPlanMode): the host decides what it may do."""
    MCP = "mcp"
    """A tool of an MCP server (`mcp__<server>__<tool>`), called from the host."""


@dataclass(frozen=True)
class ToolUse:
    """A translated call: the request for the sandbox, and what the decision looks at."""

    name: str
    kind: ToolKind
    request: ToolRequest
    path: str | None = None
    """The container path an edit writes."""
    command: str | None = None
    """The command line a Bash call runs."""
    read_only: bool = False
    """An MCP tool that only reads (the server or the user says so)."""


@dataclass(frozen=True)
class Refusal:
    """The call cannot be translated; the message goes back to the model as an error."""

    message: str


@dataclass(frozen=True)
class ToolContext:
    """What translation depends on: the tools offered, and the workspace's host path."""

    offered: frozenset[str]
    workspace_host: str | None = None
    """Host path of the workspace; accepted as another name for /workspace."""
    agent: str = "Plan"
    mcp_tools: frozenset[str] = frozenset()
    """The MCP tools this agent may be given, offered now or not (plan mode offers only
    the read-only ones; a call of another is refused with guidance, not as unknown)."""
    mcp_read_only: frozenset[str] = frozenset()
    """The MCP tools that only read."""


def translate(call: ToolCall, context: ToolContext) -> ToolUse | Refusal:
    """Translate one tool call. Nothing here raises: every problem is a Refusal."""
    if removed := removed_input(call.input):
        return Refusal(f"Not run: {removed}. Call {call.name} again with a flat input.")
    if call.name in context.mcp_tools and call.name not in context.offered:
        if call.name not in context.mcp_read_only:
            # Hidden by plan mode: the decision refuses it with guidance.
            return ToolUse(call.name, ToolKind.MCP, ToolRequest("mcp", dict(call.input)))
    elif call.name in context.mcp_tools:
        read_only = call.name in context.mcp_read_only
        request = ToolRequest("mcp", dict(call.input))
        return ToolUse(call.name, ToolKind.MCP, request, read_only=read_only)
    if call.name not in context.offered:
        allowed = ", ".join(sorted(context.offered))
        return Refusal(
            f"Tool {call.name!r} is not available to the {context.agent} agent. "
            f"Allowed tools: {allowed}."
        )
    spec = ALL_TOOLS.get(call.name)
    if spec is None:
        return Refusal(f"Tool {call.name!r} has no implementation in planrun.")
    problems = validate_input(spec, call.input)
    if problems:
        return Refusal(f"Invalid input for {call.name}: " + "; ".join(problems))
    arguments = dict(call.input)
    path_key = FILE_TOOLS.get(call.name) or DIRECTORY_TOOLS.get(call.name)
    # Read, Write and Edit always need a path; LSP only for some operations, and a
    # directory tool defaults to the workspace.
    if path_key is not None and (arguments.get(path_key) or call.name in PATH_REQUIRED):
        path = container_path(str(arguments.get(path_key, "")), context)
        if isinstance(path, Refusal):
            return path
        arguments[path_key] = path
    if call.name == "Glob":
        refusal = _refuse_escaping_pattern(str(arguments["pattern"]), context)
        if refusal is not None:
            return refusal
    if call.name in HOST_TOOLS:
        return ToolUse(call.name, ToolKind.HOST, ToolRequest(call.name, arguments))
    request = _to_request(call.name, arguments)
    if call.name == "Bash":
        return ToolUse(call.name, ToolKind.COMMAND, request, command=str(arguments["command"]))
    if call.name in WRITING_TOOLS:
        return ToolUse(call.name, ToolKind.EDIT, request, path=str(arguments["file_path"]))
    return ToolUse(call.name, ToolKind.READ, request)


def container_path(path: str, context: ToolContext) -> str | Refusal:
    """Normalise a path the model gave to a container path it may use."""
    if not path.strip():
        return Refusal("A path is required.")
    if "\0" in path:
        return Refusal("Paths cannot contain NUL characters.")
    if context.workspace_host and (
        path == context.workspace_host or path.startswith(context.workspace_host.rstrip("/") + "/")
    ):
        path = WORKSPACE_MOUNT + path[len(context.workspace_host.rstrip("/")) :]
    if not posixpath.isabs(path):
        path = posixpath.join(WORKSPACE_MOUNT, path)
    path = posixpath.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    if not any(path == root or path.startswith(root + "/") for root in _readable_roots()):
        return Refusal(
            f"{path} is outside the directories you may use: the repository "
            f"({WORKSPACE_MOUNT}), the plan directory ({PLAN_MOUNT}) and the extra read-only "
            f"directories ({EXTRA_MOUNT_ROOT})."
        )
    return path


def _refuse_escaping_pattern(pattern: str, context: ToolContext) -> Refusal | None:
    """A glob pattern may not climb out of the permitted directories on its own."""
    if ".." in pattern.replace("\\", "/").split("/"):
        return Refusal("Glob patterns cannot contain '..'; give the directory as `path` instead.")
    if pattern.startswith("/"):
        literal = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0].split("{", 1)[0]
        checked = container_path(literal.rstrip("/") or "/", context)
        if isinstance(checked, Refusal):
            return checked
    return None


def _readable_roots() -> tuple[str, ...]:
    return (WORKSPACE_MOUNT, PLAN_MOUNT, EXTRA_MOUNT_ROOT)


def _to_request(name: str, arguments: dict[str, Any]) -> ToolRequest:
    if name == "Bash":
        timeout_ms = min(
            int(arguments.get("timeout") or DEFAULT_BASH_TIMEOUT_MS), MAX_BASH_TIMEOUT_MS
        )
        return ToolRequest("bash", {"command": arguments["command"]}, timeout=timeout_ms / 1000)
    operation = {
        "Read": "read",
        "Glob": "glob",
        "Grep": "grep",
        "LS": "ls",
        "Write": "write",
        "Edit": "edit",
        "LSP": "lsp",
    }[name]
    return ToolRequest(operation, arguments)
