"""Permissions as data plus one decision: may this tool call run, and as which sandbox request?"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sandbox_runner.paths import EXTRA_MOUNT_ROOT, PLAN_MOUNT, WORKSPACE_MOUNT
from sandbox_runner.tools.bash_policy import classify
from sandbox_runner.tools.schemas import (
    ALL_TOOLS,
    DEFAULT_BASH_TIMEOUT_MS,
    MAX_BASH_TIMEOUT_MS,
    validate_input,
)
from sandbox_runner.types import ToolCall, ToolRequest

FILE_TOOLS = {"Read": "file_path", "Write": "file_path", "Edit": "file_path", "LSP": "file_path"}
DIRECTORY_TOOLS = {"Glob": "path", "Grep": "path", "LS": "path"}
WRITING_TOOLS = frozenset({"Write", "Edit", "NotebookEdit"})


class PermissionMode(StrEnum):
    """The permission modes of a session; Shift+Tab cycles them in this order."""

    DEFAULT = "default"
    ACCEPT_EDITS = "acceptEdits"
    PLAN = "plan"

    def next(self) -> PermissionMode:
        """The mode Shift+Tab switches to."""
        order = list(PermissionMode)
        return order[(order.index(self) + 1) % len(order)]


@dataclass(frozen=True)
class Allow:
    """The call may run, as this request to the sandbox."""

    request: ToolRequest


@dataclass(frozen=True)
class Deny:
    """The call is refused; the message goes back to the model as an error result."""

    message: str
    suggested_command: str | None = None


Decision = Allow | Deny


@dataclass(frozen=True)
class ToolContext:
    """What a decision depends on: the tools offered, the mode, and the one writable file."""

    offered: frozenset[str]
    mode: PermissionMode = PermissionMode.PLAN
    plan_file: str | None = None
    """Container path of the plan file, the only file a plan agent may write."""
    workspace_host: str | None = None
    """Host path of the workspace; accepted as another name for /workspace."""
    agent: str = "Plan"


def decide(call: ToolCall, context: ToolContext) -> Decision:
    """Decide one tool call. Nothing here raises: every refusal is a Deny for the model."""
    if call.name not in context.offered:
        allowed = ", ".join(sorted(context.offered))
        return Deny(
            f"Tool {call.name!r} is not available to the {context.agent} agent. "
            f"Allowed tools: {allowed}."
        )
    spec = ALL_TOOLS.get(call.name)
    if spec is None:
        return Deny(f"Tool {call.name!r} has no implementation in planrun.")
    problems = validate_input(spec, call.input)
    if problems:
        return Deny(f"Invalid input for {call.name}: " + "; ".join(problems))
    arguments = dict(call.input)
    path_key = FILE_TOOLS.get(call.name) or DIRECTORY_TOOLS.get(call.name)
    if path_key is not None and (arguments.get(path_key) or path_key in FILE_TOOLS):
        path = container_path(str(arguments.get(path_key, "")), context)
        if isinstance(path, Deny):
            return path
        arguments[path_key] = path
    if call.name == "Glob":
        refusal = _refuse_escaping_pattern(str(arguments["pattern"]), context)
        if refusal is not None:
            return refusal
    if call.name in WRITING_TOOLS or call.name == "Bash":
        refusal = _refuse_in_plan_mode(call.name, arguments, context)
        if refusal is not None:
            return refusal
    return Allow(_to_request(call.name, arguments))


def container_path(path: str, context: ToolContext) -> str | Deny:
    """Normalise a path the model gave to a container path it may use."""
    if not path.strip():
        return Deny("A path is required.")
    if "\0" in path:
        return Deny("Paths cannot contain NUL characters.")
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
        return Deny(
            f"{path} is outside the directories you may use: the repository "
            f"({WORKSPACE_MOUNT}), the plan directory ({PLAN_MOUNT}) and the extra read-only "
            f"directories ({EXTRA_MOUNT_ROOT})."
        )
    return path


def _refuse_escaping_pattern(pattern: str, context: ToolContext) -> Deny | None:
    """A glob pattern may not climb out of the permitted directories on its own."""
    if ".." in pattern.replace("\\", "/").split("/"):
        return Deny("Glob patterns cannot contain '..'; give the directory as `path` instead.")
    if pattern.startswith("/"):
        literal = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0].split("{", 1)[0]
        checked = container_path(literal.rstrip("/") or "/", context)
        if isinstance(checked, Deny):
            return checked
    return None


def _readable_roots() -> tuple[str, ...]:
    return (WORKSPACE_MOUNT, PLAN_MOUNT, EXTRA_MOUNT_ROOT)


def _refuse_in_plan_mode(name: str, arguments: dict[str, Any], context: ToolContext) -> Deny | None:
    if context.mode is not PermissionMode.PLAN:
        return None
    if name == "Bash":
        verdict = classify(str(arguments["command"]))
        if verdict.allowed:
            return None
        return Deny(verdict.guidance(), suggested_command=str(arguments["command"]))
    if name == "NotebookEdit" or context.plan_file is None:
        return Deny(
            f"{name} is not allowed in plan mode: it is read-only, and this agent has no plan file."
        )
    if arguments["file_path"] != context.plan_file:
        return Deny(
            f"{name} is only allowed on the plan file {context.plan_file} in plan mode; "
            f"{arguments['file_path']} is read-only. Describe the change in the plan instead."
        )
    return None


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
