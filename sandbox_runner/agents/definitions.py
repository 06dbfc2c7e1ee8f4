"""What a subagent is: its definition, the built-in Plan, Explore, general-purpose and
Synthesis agents."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Literal

from sandbox_runner.catalog import INHERIT, MODEL_ALIASES, READ_ONLY_TOOLS, WEB_TOOLS
from sandbox_runner.errors import ConfigError

Scope = Literal["builtin", "user", "project"]

# Lower number wins, as in the seed data model: project (1) > user (2) > built-in (3).
SCOPE_PRIORITY: dict[Scope, int] = {"builtin": 3, "user": 2, "project": 1}

RESEARCH_TOOLS: tuple[str, ...] = (*READ_ONLY_TOOLS, *WEB_TOOLS)
"""What a read-only agent may use: the sandbox's read-only tools, and the web tools (which
are offered only when the user grants hosts)."""
GENERAL_PURPOSE_TOOLS: tuple[str, ...] = (*RESEARCH_TOOLS, "Write", "Edit", "Task")
"""Every tool planrun implements; also the tools of a new definition that names none."""
# NotebookEdit is not implemented, but Claude Code agent files name it (mostly to disallow
# it), so it must count as a known name for those files to load.
# TodoWrite is the work session's checklist (answered by the session, so never a
# subagent's): files that list it load, and the session gives it to its work agent.
KNOWN_TOOLS: tuple[str, ...] = (*GENERAL_PURPOSE_TOOLS, "TodoWrite", "NotebookEdit")
TOOL_ALIASES: dict[str, str] = {"Agent": "Task", "update_work_plan": "TodoWrite"}
"""Other names agent files use for a tool: Claude Code renamed Task to Agent; the
Copilot-style plan session calls its checklist update_work_plan."""
MCP_PREFIX = "mcp__"
"""How the tools of MCP servers are named: `mcp__<server>__<tool>`."""
INERT_IN_SUBAGENT = frozenset({"Task", "TodoWrite"})
"""Tools a subagent is never given, whatever its file lists: a subagent launches none,
and keeps no checklist (the session's work agent does)."""

BUILTIN_NAMES = frozenset({"Plan", "Explore", "general-purpose", "Synthesis"})
"""The names of the built-in agents (BUILTINS)."""
NOT_DISPATCHED = frozenset({"synthesis"})
"""Built-ins (case-folded) that `planrun plan` runs itself and a Task tool never lists."""


@dataclass(frozen=True)
class AgentDefinition:
    """A subagent: its prompt, tools and model, and the file that defined it."""

    name: str
    """The name the Task tool and `planrun plan --agent` refer to."""
    description: str
    """What the agent does, one or two sentences."""
    system_prompt: str
    """The system prompt (the body of a Markdown definition)."""
    tools: tuple[str, ...]
    """The tools offered to the agent, before disallowed_tools are taken away."""
    disallowed_tools: tuple[str, ...] = ()
    """Tools never offered, even when listed in tools."""
    model: str = INHERIT
    """"inherit" (the parent's model), an alias (sonnet, opus, haiku) or a model id."""
    file_path: str = ""
    """The defining file, or "<builtin:NAME>" for a built-in."""
    scope: Scope = "builtin"
    """Where the winning definition came from."""
    priority: int = SCOPE_PRIORITY["builtin"]
    """1 project, 2 user, 3 built-in: the lower number overrides the higher."""
    when_to_use: str = ""
    """Guidance for a parent agent's Task tool; the description when empty."""
    read_only: bool = False
    """True for Plan and Explore, also when a file overrides them: no Write, Edit or Task."""
    ignored_model: str = ""
    """A model a project file asked for, ignored because the user does not trust the project."""
    task_agents: tuple[str, ...] | None = None
    """The agents its Task tool may launch (`Agent(a, b)` in a file); None: any it may."""

    @property
    def overrides_builtin(self) -> bool:
        """Whether a user or project file replaced (part of) a built-in agent."""
        return self.scope != "builtin" and self.name in BUILTIN_NAMES

    def override_note(self) -> str:
        """How planrun names a built-in agent that a file replaced ("" when none did)."""
        if not self.overrides_builtin:
            return ""
        return f"{self.name} is overridden by {self.file_path} ({self.scope})"

    def effective_tools(self) -> tuple[str, ...]:
        """The tools the agent is offered: tools minus disallowed_tools, in order."""
        return tuple(tool for tool in self.tools if tool not in self.disallowed_tools)

    def planrun_tools(self) -> tuple[str, ...]:
        """The effective tools planrun itself implements (the MCP ones left out)."""
        return tuple(tool for tool in self.effective_tools() if not tool.startswith(MCP_PREFIX))

    def gives_mcp_tool(self, server: str, tool: str) -> bool:
        """Whether the agent may use an MCP server's tool: any of them when its tools name
        none (as Claude Code's agents inherit them); else those named, `mcp__<server>`
        naming all of a server's. In plan mode only the read-only ones are offered."""
        full, whole = f"{MCP_PREFIX}{server}__{tool}", f"{MCP_PREFIX}{server}"
        if full in self.disallowed_tools or whole in self.disallowed_tools:
            return False
        named = [name for name in self.tools if name.startswith(MCP_PREFIX)]
        return not named or full in named or whole in named

    def writing_tools(self) -> tuple[str, ...]:
        """The effective tools a read-only agent may not have (Task aside: it is inert; an
        MCP tool is offered to it only if it reads, which is known once its server runs)."""
        return tuple(
            tool
            for tool in self.planrun_tools()
            if tool not in RESEARCH_TOOLS and tool not in INERT_IN_SUBAGENT
        )

    @property
    def reads_only(self) -> bool:
        """Whether it can only read: a read-only built-in, or a file giving no writing tool."""
        return self.read_only or not self.writing_tools()

    def to_dict(self) -> dict[str, Any]:
        """The definition with the seed data model's camelCase names, for JSON output."""
        return {
            "name": self.name,
            "description": self.description,
            "systemPrompt": self.system_prompt,
            "tools": list(self.tools),
            "disallowedTools": list(self.disallowed_tools),
            "model": self.model,
            "filePath": self.file_path,
            "scope": self.scope,
            "priority": self.priority,
            "whenToUse": self.when_to_use,
            "readOnly": self.read_only,
            "ignoredModel": self.ignored_model or None,
            "taskAgents": None if self.task_agents is None else list(self.task_agents),
        }


def resolve_model(definition: AgentDefinition, parent_model: str) -> str:
    """The model id a definition runs with.

    Args:
        definition: the subagent's definition.
        parent_model: the model of the session or CLI run that starts the subagent.

    Returns:
        parent_model for "inherit", the model id for an alias, otherwise the model as given.
    """
    model = definition.model.strip()
    if not model or model.casefold() == INHERIT:
        model = parent_model
    return MODEL_ALIASES.get(model.casefold(), model)


def check_read_only(definition: AgentDefinition) -> None:
    """Refuse a read-only agent that would be offered a tool beyond RESEARCH_TOOLS (or Task).

    Raises:
        ConfigError: naming the agent, the file that defined it and the tools to remove.
    """
    if not definition.read_only:
        return
    extra = definition.writing_tools()
    if extra:
        raise ConfigError(
            f"agent {definition.name!r} is read-only, but {definition.file_path} gives it "
            f"{', '.join(extra)}; remove them (a read-only agent may use only "
            f"{', '.join(RESEARCH_TOOLS)})"
        )


def ungranted_note(agent: AgentDefinition) -> str:
    """The line saying that an agent file lists web tools no grant covers ("" when it lists
    none, or the agent's tools are a built-in's own)."""
    listed = [tool for tool in agent.effective_tools() if tool in WEB_TOOLS]
    if (
        not listed
        or agent.scope == "builtin"
        or agent.tools in (RESEARCH_TOOLS, GENERAL_PURPOSE_TOOLS)
    ):
        return ""
    return (
        f"{agent.file_path} lists {', '.join(listed)} for agent {agent.name}, not offered: "
        "no web access is granted (the `web` setting in ~/.planrun/config.yaml, or "
        "--allow-web HOST)"
    )


def _builtin_prompt(filename: str) -> str:
    prompt = files("sandbox_runner.agents") / "prompts" / filename
    return prompt.read_text(encoding="utf-8").strip()


# The built-ins are read once, at import, so that they are plain constants and a later
# fake file system (pyfakefs in tests) or a changed working directory cannot hide them.
PLAN = AgentDefinition(
    name="Plan",
    description=(
        "Software architect agent for designing implementation plans. Explores the codebase "
        "read-only and returns a step-by-step plan, identifies the critical files for "
        "implementation and considers architectural trade-offs."
    ),
    system_prompt=_builtin_prompt("plan.md"),
    tools=RESEARCH_TOOLS,
    file_path="<builtin:Plan>",
    when_to_use=(
        "Use when you need an implementation plan: a software architect explores the "
        "codebase read-only and returns a step-by-step plan with the critical files"
    ),
    read_only=True,
)
EXPLORE = AgentDefinition(
    name="Explore",
    description=(
        "Fast read-only search agent: finds files by pattern, searches code for keywords "
        "and answers questions about the codebase with file paths and line numbers."
    ),
    system_prompt=_builtin_prompt("explore.md"),
    tools=RESEARCH_TOOLS,
    file_path="<builtin:Explore>",
    when_to_use=(
        "Use to explore a codebase quickly: find files by pattern, search code for keywords "
        "or answer questions about how the code works; say how thorough to be (quick, "
        "medium or very thorough)"
    ),
    read_only=True,
)
GENERAL_PURPOSE = AgentDefinition(
    name="general-purpose",
    description=(
        "General-purpose agent for researching complex questions, searching for code and "
        "carrying out multi-step tasks that change files and run commands."
    ),
    system_prompt=_builtin_prompt("general-purpose.md"),
    tools=GENERAL_PURPOSE_TOOLS,
    file_path="<builtin:general-purpose>",
    when_to_use=(
        "Use for complex, multi-step tasks that need to change files or run commands, or "
        "when a search may take several rounds to find the right code"
    ),
)
SYNTHESIS = AgentDefinition(
    name="Synthesis",
    description=(
        "Merges the plans of several perspectives into one recommended plan: the best "
        "decision on each point, where each came from, and how each conflict was resolved. "
        "Read-only; it may check the plans' claims against the repository."
    ),
    system_prompt=_builtin_prompt("synthesis.md"),
    tools=READ_ONLY_TOOLS,
    file_path="<builtin:Synthesis>",
    when_to_use=(
        "Used by `planrun plan` after two or more plans are valid, to write recommended.md; "
        "not meant to be dispatched on its own"
    ),
    read_only=True,
)
BUILTINS: tuple[AgentDefinition, ...] = (PLAN, EXPLORE, GENERAL_PURPOSE, SYNTHESIS)
