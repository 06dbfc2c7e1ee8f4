"""One agent file, as Claude Code writes them: YAML front matter, then the system prompt.

What planrun takes from a file, and what it leaves, is in docs/configuration.md ("Agent
files written for Claude Code"); each field left out is named in a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_runner.agents.definitions import KNOWN_TOOLS, MCP_PREFIX, TOOL_ALIASES, Scope
from sandbox_runner.catalog import INHERIT, MODEL_ALIASES, MODEL_ID
from sandbox_runner.safe_io import UnsafeFileError, read_beneath, read_untrusted_bytes

if TYPE_CHECKING:
    import yaml

MAX_AGENT_BYTES = 1024 * 1024
"""An agent file larger than this is skipped with a warning."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Front-matter keys planrun reads, in both Claude Code's camelCase and snake_case.
_FIELDS = {
    "name": "name",
    "description": "description",
    "tools": "tools",
    "disallowedTools": "disallowed_tools",
    "disallowed_tools": "disallowed_tools",
    "model": "model",
    "whenToUse": "when_to_use",
    "when_to_use": "when_to_use",
}
_TOOL_FIELDS = {"tools", "disallowed_tools"}
_COSMETIC = {"color"}
"""Claude Code's display colour: nothing to apply, nothing to warn about."""
_TOOL_KEYS = {tool.casefold(): tool for tool in KNOWN_TOOLS} | {
    alias.casefold(): tool for alias, tool in TOOL_ALIASES.items()
}
# "Tool" or "Tool(specifier)", as in Claude Code's tools field and permission rules.
_TOOL_ENTRY = re.compile(r"(?P<name>[^()\s]+)\s*(?:\((?P<spec>.*)\))?", re.DOTALL)
# `mcp__<server>__<tool>`, or `mcp__<server>` for all of a server's tools.
_MCP_TOOL = re.compile(MCP_PREFIX + r"[A-Za-z0-9][A-Za-z0-9-]*(?:__[A-Za-z0-9_-]+)?")


@dataclass(frozen=True)
class AgentFile:
    """What one agent file asks for, in AgentDefinition's field names."""

    path: Path
    scope: Scope
    name: str
    fields: dict[str, Any]
    body: str
    notes: list[str] = field(default_factory=list)
    """Problems that did not stop the file from loading, one line each."""


class InvalidAgentFile(Exception):
    """Why an agent file cannot be used; it becomes a warning for that file."""


def read_agent_file(path: Path, scope: Scope, beneath: Path | None = None) -> AgentFile:
    """Parse one Markdown agent file: YAML front matter between '---' lines, then the body.

    Raises:
        InvalidAgentFile: the file cannot be read or used; the message says why.
    """
    # Project agent files are the repository author's: a FIFO must not hang planrun, a link
    # to /dev/zero exhaust its memory, nor a link to a host file be read (beneath).
    try:
        if beneath is None:
            raw = read_untrusted_bytes(path, MAX_AGENT_BYTES)
        else:
            raw = read_beneath(beneath, path, MAX_AGENT_BYTES)
        if raw is None:
            raise InvalidAgentFile("cannot read the file: No such file or directory")
        text = raw.decode("utf-8-sig")
    except UnsafeFileError as error:
        reason = str(error).replace(str(path), "it")
        raise InvalidAgentFile(f"cannot read the file: {reason}") from error
    except UnicodeDecodeError as error:
        raise InvalidAgentFile(f"not UTF-8 text (invalid byte at offset {error.start})") from error
    header, body = _split_front_matter(text)
    import yaml  # only when there is an agent file: most starts read none

    try:
        data = yaml.safe_load(header)
    except yaml.YAMLError as error:
        raise InvalidAgentFile(f"invalid YAML front matter: {_yaml_problem(error)}") from error
    if not isinstance(data, dict):
        raise InvalidAgentFile("the front matter must be a mapping of fields (name: ..., ...)")
    notes: list[str] = []
    fields = _normalise_fields(data, notes)
    name = fields.pop("name", None)
    if name is None:
        raise InvalidAgentFile("the required field 'name' is missing")
    return AgentFile(path, scope, name, fields, body.strip(), notes)


def _split_front_matter(text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise InvalidAgentFile("no YAML front matter: the file must start with a '---' line")
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise InvalidAgentFile("the front matter has no closing '---' line")


def _normalise_fields(data: dict[Any, Any], notes: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    unused: list[str] = []
    for key, value in data.items():
        field_name = _FIELDS.get(str(key))
        if field_name is None:
            if str(key) not in _COSMETIC:
                unused.append(str(key))
            continue
        if value is None:
            # `tools:` with nothing after it is an omitted field, as in Claude Code.
            continue
        if field_name in _TOOL_FIELDS:
            fields.update(_tool_fields(str(key), field_name, value, notes))
        elif field_name == "model":
            fields["model"] = _model(_text(str(key), value), notes)
        else:
            fields[field_name] = _text(str(key), value)
    if unused:
        notes.append(
            f"planrun does not use these fields, ignored: {', '.join(unused)} "
            "(see 'Agent files written for Claude Code' in docs/configuration.md)"
        )
    name = fields.get("name")
    if name is not None and not _NAME.fullmatch(name):
        raise InvalidAgentFile(
            f"invalid name {name!r}: use letters, digits, '-', '_' or '.' (at most 64)"
        )
    return fields


def _text(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidAgentFile(f"field {key!r} must be a string, not {_kind(value)}")
    if not value.strip():
        raise InvalidAgentFile(f"field {key!r} is empty")
    return value.strip()


def _model(model: str, notes: list[str]) -> str:
    """An alias, inherit or a model id as written; anything else inherits, with a note."""
    if (
        model.casefold() in MODEL_ALIASES
        or model.casefold() == INHERIT
        or MODEL_ID.fullmatch(model)
    ):
        return model
    # Sent to the API as it is, an unknown name would fail every request of the agent.
    notes.append(
        f"model {model!r} is neither an alias ({', '.join([*MODEL_ALIASES, INHERIT])}) nor a "
        "model id (claude-...); the agent inherits its parent's model"
    )
    return INHERIT


def _tool_fields(key: str, field_name: str, value: object, notes: list[str]) -> dict[str, Any]:
    """The tools (or disallowed tools) a tools field names, and Agent(...)'s allowed types."""
    entries = _tool_entries(key, value)
    tools: list[str] = []
    left_out: list[str] = []
    task_agents: list[str] | None = None
    for entry in entries:
        if _MCP_TOOL.fullmatch(entry):
            # Which exist is known once the servers run: an unknown one is never offered.
            if entry not in tools:
                tools.append(entry)
            continue
        match = _TOOL_ENTRY.fullmatch(entry)
        tool = _TOOL_KEYS.get(match["name"].casefold()) if match else None
        if tool is None or match is None:
            left_out.append(entry)
            continue
        spec = match["spec"]
        if spec is not None and tool != "Task":
            # Bash(git diff:*) and the like: planrun cannot hold a tool to a specifier, and
            # giving the whole tool would give more than the file asked for.
            left_out.append(entry)
            continue
        if spec is not None and field_name == "tools":
            task_agents = [*(task_agents or []), *_split_outside_parentheses(spec)]
        if tool not in tools:
            tools.append(tool)
    if entries and not tools and field_name == "tools":
        # Claude Code refuses such a file too; loading it with no tools would hide the mistake.
        raise InvalidAgentFile(
            f"{key!r} names no tool planrun has ({', '.join(left_out)}); the file is skipped"
        )
    if left_out:
        notes.append(
            f"{key!r} names tools planrun does not have, left out: {', '.join(left_out)} "
            f"(planrun has {', '.join(KNOWN_TOOLS)}, and Agent for Task)"
        )
    if not entries and field_name == "tools":
        # Claude Code's docs: the tools field "inherits all tools if omitted"; they say
        # nothing of an empty one, so planrun takes it as written, an empty allowlist.
        notes.append(
            f"{key!r} is empty, so the agent has no tools "
            "(leave the field out to give it every tool)"
        )
    found: dict[str, Any] = {field_name: tuple(tools)}
    if task_agents is not None:
        found["task_agents"] = tuple(dict.fromkeys(task_agents))
    return found


def _tool_entries(key: str, value: object) -> list[str]:
    if isinstance(value, str):
        # Claude Code writes tools as "Read, Grep, Agent(worker, researcher)".
        return _split_outside_parentheses(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise InvalidAgentFile(
        f"field {key!r} must be a comma-separated string or a list of tool names, "
        f"not {_kind(value)}"
    )


def _split_outside_parentheses(text: str) -> list[str]:
    """The comma-separated parts of text; a comma inside (...) does not separate."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _yaml_problem(error: yaml.YAMLError) -> str:
    import yaml

    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        # +2: marks count from 0 and the front matter starts after the opening '---' line.
        return f"{error.problem} (line {error.problem_mark.line + 2})"
    return str(error)
