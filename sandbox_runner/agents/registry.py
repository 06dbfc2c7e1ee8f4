"""The subagents available in a workspace: built-ins overridden by user and project files."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_runner.agents.definitions import (
    BUILTINS,
    GENERAL_PURPOSE_TOOLS,
    KNOWN_TOOLS,
    SCOPE_PRIORITY,
    AgentDefinition,
    Scope,
    check_read_only,
)
from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import planrun_home
from sandbox_runner.safe_io import UnsafeFileError, read_beneath, read_untrusted_bytes

if TYPE_CHECKING:
    import yaml

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Front-matter keys planrun reads, in both Claude Code's camelCase and snake_case. Other
# keys (color, permissionMode, ...) belong to other tools and are ignored.
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
MAX_AGENT_BYTES = 1024 * 1024
"""An agent file larger than this is skipped with a warning."""
_KNOWN_TOOL_KEYS = {tool.casefold(): tool for tool in KNOWN_TOOLS}


@dataclass(frozen=True)
class AgentWarning:
    """A problem with one agent definition file; reported, never raised."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class _AgentFile:
    path: Path
    scope: Scope
    name: str
    fields: dict[str, Any]
    body: str
    notes: list[str] = field(default_factory=list)
    """Problems that did not stop the file from loading (tools planrun does not have)."""


class _InvalidFile(Exception):
    """Why an agent file cannot be used; it becomes an AgentWarning for that file."""


def agent_dirs(workspace: Path | None, home: Path) -> list[tuple[Path, Scope]]:
    """The directories agent files are read from, lowest priority first."""
    dirs: list[tuple[Path, Scope]] = [(home / "agents", "user")]
    if workspace is not None:
        # planrun's own directory comes last, so it wins over the Claude Code one.
        dirs.append((workspace / ".claude" / "agents", "project"))
        dirs.append((workspace / ".planrun" / "agents", "project"))
    return dirs


class Registry:
    """The subagent definitions of one workspace, by name, with the problems found loading them."""

    def __init__(
        self, definitions: Iterable[AgentDefinition], warnings: Iterable[AgentWarning] = ()
    ) -> None:
        self._definitions = {definition.name.casefold(): definition for definition in definitions}
        self.warnings: list[AgentWarning] = list(warnings)
        """Problems with agent files, in the order found; those files were skipped."""

    @classmethod
    def load(
        cls, workspace: Path | None, home: Path | None = None, *, trust_project: bool = False
    ) -> Registry:
        """Load the built-ins, then user files, then project files, each overriding the last.

        Args:
            workspace: the repository; None reads no project files.
            home: planrun's per-user directory; $PLANRUN_HOME or ~/.planrun when None.
            trust_project: whether project files may choose a model; when not, a model
                they name is kept in ignored_model and not used.

        Returns:
            The registry; invalid files are listed in its warnings, not raised.
        """
        definitions = {definition.name.casefold(): definition for definition in BUILTINS}
        warnings: list[AgentWarning] = []
        for directory, scope in agent_dirs(workspace, home or planrun_home()):
            # A repository's files are read beneath it: no link out to the host's files.
            beneath = workspace if scope == "project" else None
            trusted = trust_project or scope != "project"
            _load_directory(directory, scope, definitions, warnings, beneath, trusted)
        return cls(definitions.values(), warnings)

    def get(self, name: str) -> AgentDefinition:
        """The definition called name (an exact match first, then ignoring case).

        Raises:
            ConfigError: no agent has that name; the message lists the known names.
        """
        for definition in self._definitions.values():
            if definition.name == name:
                return definition
        found = self._definitions.get(name.casefold())
        if found is None:
            known = ", ".join(definition.name for definition in self.all())
            raise ConfigError(f"unknown agent {name!r}; known agents: {known}")
        return found

    def all(self) -> list[AgentDefinition]:
        """Every definition, sorted by name (ignoring case)."""
        return sorted(self._definitions.values(), key=lambda definition: definition.name.casefold())


def _load_directory(
    directory: Path,
    scope: Scope,
    definitions: dict[str, AgentDefinition],
    warnings: list[AgentWarning],
    beneath: Path | None = None,
    trusted: bool = True,
) -> None:
    defined_here: dict[str, Path] = {}
    for path in _markdown_files(directory, warnings, beneath):
        try:
            agent_file = _read_agent_file(path, scope, beneath)
            key = agent_file.name.casefold()
            if key in defined_here:
                raise _InvalidFile(
                    f"agent {agent_file.name!r} is already defined by {defined_here[key]}; "
                    "this file is ignored"
                )
            definition = _merge(definitions.get(key), agent_file, trusted)
        except _InvalidFile as problem:
            warnings.append(AgentWarning(path, str(problem)))
            continue
        defined_here[key] = path
        definitions[key] = definition
        warnings.extend(AgentWarning(path, note) for note in agent_file.notes)
        warnings.extend(_soft_problems(definition, path))


def _markdown_files(
    directory: Path, warnings: list[AgentWarning], beneath: Path | None
) -> list[Path]:
    if not directory.is_dir():
        return []
    if beneath is not None and not directory.resolve().is_relative_to(beneath.resolve()):
        warnings.append(
            AgentWarning(
                directory,
                f"leads outside {beneath} (to {directory.resolve()}); planrun does not read it",
            )
        )
        return []
    try:
        with os.scandir(directory) as entries:
            names = [entry.name for entry in entries if entry.name.endswith(".md")]
    except OSError as error:
        warnings.append(AgentWarning(directory, f"cannot list the directory: {_reason(error)}"))
        return []
    # Directories are skipped; anything else, a dangling symlink too, is read and reported.
    return [directory / name for name in sorted(names) if not (directory / name).is_dir()]


def _soft_problems(definition: AgentDefinition, path: Path) -> list[AgentWarning]:
    """Problems that leave the definition usable: it loads, and the warning says why to fix it."""
    problems = []
    if not definition.system_prompt:
        problems.append(AgentWarning(path, "the body is empty, so the agent has no system prompt"))
    try:
        check_read_only(definition)
    except ConfigError as error:
        # Kept in the registry so `planrun agents show` tells the truth; running it fails.
        problems.append(AgentWarning(path, str(error)))
    return problems


def _read_agent_file(path: Path, scope: Scope, beneath: Path | None = None) -> _AgentFile:
    """Parse one Markdown agent file: YAML front matter between '---' lines, then the body."""
    # Project agent files are the repository author's: a FIFO must not hang planrun, a link
    # to /dev/zero exhaust its memory, nor a link to a host file be read (beneath).
    try:
        if beneath is None:
            raw = read_untrusted_bytes(path, MAX_AGENT_BYTES)
        else:
            raw = read_beneath(beneath, path, MAX_AGENT_BYTES)
        if raw is None:
            raise _InvalidFile("cannot read the file: No such file or directory")
        text = raw.decode("utf-8-sig")
    except UnsafeFileError as error:
        reason = str(error).replace(str(path), "it")
        raise _InvalidFile(f"cannot read the file: {reason}") from error
    except UnicodeDecodeError as error:
        raise _InvalidFile(f"not UTF-8 text (invalid byte at offset {error.start})") from error
    header, body = _split_front_matter(text)
    import yaml  # only when there is an agent file: most starts read none

    try:
        data = yaml.safe_load(header)
    except yaml.YAMLError as error:
        raise _InvalidFile(f"invalid YAML front matter: {_yaml_problem(error)}") from error
    if not isinstance(data, dict):
        raise _InvalidFile("the front matter must be a mapping of fields (name: ..., ...)")
    notes: list[str] = []
    fields = _normalise_fields(data, notes)
    name = fields.pop("name", None)
    if name is None:
        raise _InvalidFile("the required field 'name' is missing")
    return _AgentFile(path, scope, name, fields, body.strip(), notes)


def _merge(
    base: AgentDefinition | None, agent_file: _AgentFile, trusted: bool = True
) -> AgentDefinition:
    """Apply a file to the definition it overrides: only the fields the file sets change.

    An untrusted file's model is not applied: it is kept in ignored_model, to be reported.
    """
    origin: dict[str, Any] = {
        "file_path": str(agent_file.path),
        "scope": agent_file.scope,
        "priority": SCOPE_PRIORITY[agent_file.scope],
    }
    changes = dict(agent_file.fields)
    if not trusted and "model" in changes:
        changes["ignored_model"] = changes.pop("model")
    if agent_file.body:
        changes["system_prompt"] = agent_file.body
    if base is not None:
        # The base's name and read_only stay: the Task tool and saved plans use the name,
        # and a file must not turn a read-only agent into one that can write.
        return replace(base, **changes, **origin)
    if "description" not in changes:
        raise _InvalidFile("the required field 'description' is missing (needed for a new agent)")
    changes.setdefault("system_prompt", "")
    changes.setdefault("tools", GENERAL_PURPOSE_TOOLS)
    return AgentDefinition(name=agent_file.name, **changes, **origin)


def _split_front_matter(text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise _InvalidFile("no YAML front matter: the file must start with a '---' line")
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise _InvalidFile("the front matter has no closing '---' line")


def _normalise_fields(data: dict[Any, Any], notes: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in data.items():
        field_name = _FIELDS.get(str(key))
        if field_name is None or value is None:
            continue
        if field_name in _TOOL_FIELDS:
            fields[field_name] = _tool_names(str(key), value, notes)
        else:
            fields[field_name] = _text(str(key), value)
    name = fields.get("name")
    if name is not None and not _NAME.fullmatch(name):
        raise _InvalidFile(
            f"invalid name {name!r}: use letters, digits, '-', '_' or '.' (at most 64)"
        )
    return fields


def _text(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise _InvalidFile(f"field {key!r} must be a string, not {_kind(value)}")
    if not value.strip():
        raise _InvalidFile(f"field {key!r} is empty")
    return value.strip()


def _tool_names(key: str, value: object, notes: list[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        # Claude Code writes tools as "Read, Grep, Glob".
        names = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        names = [item.strip() for item in value]
    else:
        raise _InvalidFile(
            f"field {key!r} must be a comma-separated string or a list of tool names, "
            f"not {_kind(value)}"
        )
    tools: list[str] = []
    unknown: list[str] = []
    for name in names:
        tool = _KNOWN_TOOL_KEYS.get(name.casefold())
        if tool is None:
            unknown.append(name)
        elif tool not in tools:
            tools.append(tool)
    if unknown:
        # Claude Code files name tools planrun lacks (WebFetch, mcp__...): the agent still
        # loads, without them, and the warning says so.
        notes.append(
            f"{key!r} names tools planrun does not have, left out: {', '.join(unknown)} "
            f"(known tools: {', '.join(KNOWN_TOOLS)})"
        )
    return tuple(tools)


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


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
