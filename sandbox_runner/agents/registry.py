"""The subagents available in a workspace: built-ins overridden by user and project files."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sandbox_runner.agents.agent_file import AgentFile, InvalidAgentFile, read_agent_file
from sandbox_runner.agents.definitions import (
    BUILTIN_NAMES,
    BUILTINS,
    GENERAL_PURPOSE_TOOLS,
    SCOPE_PRIORITY,
    AgentDefinition,
    Scope,
    check_read_only,
)
from sandbox_runner.catalog import INHERIT
from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import claude_home as default_claude_home
from sandbox_runner.paths import planrun_home

_BUILTIN_KEYS = {name.casefold(): name for name in BUILTIN_NAMES}
_TOOL_CHANGES = {
    "tools": "tools",
    "disallowed_tools": "disallowedTools",
    "task_agents": "Agent(...)",
}
"""The fields that change an agent's tools, by the name a file gives them."""


@dataclass(frozen=True)
class AgentWarning:
    """A problem with one agent definition file; reported, never raised."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class AgentDir:
    """A directory agent files are read from."""

    path: Path
    scope: Scope
    may_change_builtin_tools: bool
    """Only planrun's own user directory: a repository's files are a stranger's, and
    Claude Code's files were written for Claude Code's agents, not planrun's."""


def agent_dirs(workspace: Path | None, home: Path, claude_home: Path) -> list[AgentDir]:
    """The directories agent files are read from, lowest priority first.

    In each scope planrun's own directory comes after Claude Code's, so it wins a name
    both define; a project file wins over a user file, as in Claude Code.
    """
    dirs = [
        AgentDir(claude_home / "agents", "user", False),
        AgentDir(home / "agents", "user", True),
    ]
    if workspace is not None:
        dirs.append(AgentDir(workspace / ".claude" / "agents", "project", False))
        dirs.append(AgentDir(workspace / ".planrun" / "agents", "project", False))
    return dirs


class Registry:
    """The subagent definitions of one workspace, by name, with the problems found loading them."""

    def __init__(
        self, definitions: Iterable[AgentDefinition], warnings: Iterable[AgentWarning] = ()
    ) -> None:
        self._definitions = {definition.name.casefold(): definition for definition in definitions}
        self.warnings: list[AgentWarning] = list(warnings)
        """Problems with agent files, in the order found: files skipped, or loaded in part."""
        self.directories: list[Path] = []
        """The directories agent files were looked for in, lowest priority first."""

    @classmethod
    def load(
        cls,
        workspace: Path | None,
        home: Path | None = None,
        *,
        trust_project: bool = False,
        claude_home: Path | None = None,
    ) -> Registry:
        """Load the built-ins, then user files, then project files, each overriding the last.

        Args:
            workspace: the repository; None reads no project files.
            home: planrun's per-user directory; $PLANRUN_HOME or ~/.planrun when None.
            trust_project: whether project files may choose a model; when not, a model
                they name is kept in ignored_model and not used.
            claude_home: Claude Code's per-user directory, whose agents/ is read too;
                $CLAUDE_CONFIG_DIR or ~/.claude when None.

        Returns:
            The registry; invalid files are listed in its warnings, not raised.
        """
        definitions = {definition.name.casefold(): definition for definition in BUILTINS}
        warnings: list[AgentWarning] = []
        dirs = agent_dirs(workspace, home or planrun_home(), claude_home or default_claude_home())
        for directory in dirs:
            # A repository's files are read beneath it: no link out to the host's files.
            beneath = workspace if directory.scope == "project" else None
            trusted = trust_project or directory.scope != "project"
            _load_directory(directory, definitions, warnings, beneath, trusted)
        registry = cls(definitions.values(), warnings)
        registry.directories = [directory.path for directory in dirs]
        return registry

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
    directory: AgentDir,
    definitions: dict[str, AgentDefinition],
    warnings: list[AgentWarning],
    beneath: Path | None = None,
    trusted: bool = True,
) -> None:
    defined_here: dict[str, Path] = {}
    for path in _markdown_files(directory.path, warnings, beneath):
        try:
            agent_file = read_agent_file(path, directory.scope, beneath)
            key = agent_file.name.casefold()
            if key in defined_here:
                raise InvalidAgentFile(
                    f"agent {agent_file.name!r} is already defined by {defined_here[key]}; "
                    "this file is ignored"
                )
            if key in _BUILTIN_KEYS and not directory.may_change_builtin_tools:
                agent_file = _without_tool_changes(agent_file, _BUILTIN_KEYS[key])
            definition = _merge(definitions.get(key), agent_file, trusted)
        except InvalidAgentFile as problem:
            warnings.append(AgentWarning(path, str(problem)))
            continue
        defined_here[key] = path
        definitions[key] = definition
        warnings.extend(AgentWarning(path, note) for note in agent_file.notes)
        warnings.extend(_soft_problems(definition, path))


def _without_tool_changes(agent_file: AgentFile, builtin: str) -> AgentFile:
    """The file with the tools it gives a built-in taken out, and a note saying so.

    A built-in's tools are what makes it safe to run (Plan and Explore only read) and fit
    for its job; a repository's file, or one written for Claude Code's agents, may change
    its prompt, description and (if trusted) model, but not its tools.
    """
    asked = [name for name in _TOOL_CHANGES if name in agent_file.fields]
    if not asked:
        return agent_file
    fields = {name: value for name, value in agent_file.fields.items() if name not in asked}
    # Notes about the tools no longer apply: those tools are not used at all.
    notes = [note for note in agent_file.notes if not note.startswith(("'tools'", "'disallowed"))]
    notes.append(
        f"a file here cannot change the tools of the built-in {builtin} agent, so its "
        f"{'/'.join(_TOOL_CHANGES[name] for name in asked)} are ignored "
        f"(only ~/.planrun/agents may change them)"
    )
    return replace(agent_file, fields=fields, notes=notes)


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


def _merge(
    base: AgentDefinition | None, agent_file: AgentFile, trusted: bool = True
) -> AgentDefinition:
    """Apply a file to the definition it overrides: only the fields the file sets change.

    An untrusted file's model is not applied: it is kept in ignored_model, to be reported.
    "inherit" asks for nothing the user did not choose, so it needs no trust.
    """
    origin: dict[str, Any] = {
        "file_path": str(agent_file.path),
        "scope": agent_file.scope,
        "priority": SCOPE_PRIORITY[agent_file.scope],
    }
    changes = dict(agent_file.fields)
    if not trusted and changes.get("model", INHERIT).casefold() != INHERIT:
        changes["ignored_model"] = changes.pop("model")
    if agent_file.body:
        changes["system_prompt"] = agent_file.body
    if base is not None:
        # The base's name and read_only stay: the Task tool and saved plans use the name,
        # and a file must not turn a read-only agent into one that can write.
        return replace(base, **changes, **origin)
    if "description" not in changes:
        raise InvalidAgentFile(
            "the required field 'description' is missing (needed for a new agent)"
        )
    changes.setdefault("system_prompt", "")
    changes.setdefault("tools", GENERAL_PURPOSE_TOOLS)
    return AgentDefinition(name=agent_file.name, **changes, **origin)


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
