"""The Task tool of a session: a subagent in a container of its own, its answer as text.

A plan session may launch only read-only agents (Plan, Explore); a work session may also
launch general-purpose, whose container mounts the workspace read-write. The mode is read
when the call is made, so a Task call in plan mode can never start a writing agent.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runner import Model
from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.agents.definitions import (
    INERT_IN_SUBAGENT,
    AgentDefinition,
    check_read_only,
)
from sandbox_runner.agents.events import EventSink
from sandbox_runner.agents.hooks import Approver
from sandbox_runner.agents.loop import AgentLoop
from sandbox_runner.agents.loop_config import LoopConfig
from sandbox_runner.agents.run_state import LimitReached
from sandbox_runner.agents.web_tools import WebTools
from sandbox_runner.errors import ConfigError, PlanrunError
from sandbox_runner.limits import RunLimits
from sandbox_runner.session.ui import SubagentSandboxes
from sandbox_runner.tools.mcp_offer import McpTools
from sandbox_runner.tools.permissions import PermissionMode, Rules
from sandbox_runner.tools.policy import ToolContext
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.types import ToolCall, ToolResult
from sandbox_runner.web_grant import WebGrant, offered

SUBAGENT_NOTE = (
    "You are a subagent: do the task below and answer with your findings as text. You have "
    "no plan file; the agent that launched you writes the plan."
)


@dataclass
class TaskRunner:
    """Answers Task calls for one session."""

    agents: Callable[[], list[AgentDefinition]]
    """The agents that may be launched now (it depends on the mode)."""
    sandboxes: SubagentSandboxes
    model: Callable[[str], Model]
    model_id: str
    workspace: Path
    transcripts: Path
    limits: RunLimits
    approver_mode: Callable[[], PermissionMode]
    approver: Approver | None = None
    on_event: EventSink | None = None
    slots: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(4))
    """The session's budget of subagent containers, shared by its Task runners."""
    memory: str = ""
    """The memory files' section of every subagent's prompt (agents.memory)."""
    web: WebGrant = field(default_factory=WebGrant)
    """The hosts the subagents' web tools may reach; none: they have no web tools."""
    mcp: McpTools | None = None
    """The session's MCP servers: a read-only agent is offered their read-only tools."""
    on_loop: Callable[[str, AgentLoop], None] | None = None
    """Told of each subagent's loop (its label, the loop) when it starts: the session
    counts its tokens."""

    def __post_init__(self) -> None:
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self, call: ToolCall, stop: Cancel) -> ToolResult:
        """Run the subagent CALL asks for; it stops early once STOP is set (the turn that
        launched it is over, or the user interrupted)."""
        wanted = str(call.input.get("subagent_type", ""))
        allowed = {agent.name.casefold(): agent for agent in self.agents()}
        agent = allowed.get(wanted.casefold())
        if agent is None:
            names = ", ".join(sorted(a.name for a in allowed.values()))
            return ToolResult(
                call.id, f"Cannot launch {wanted!r} here; the agents you may launch: {names}.", True
            )
        try:
            if agent.read_only:
                check_read_only(agent)
            text = self._run(agent, str(call.input.get("prompt", "")), stop)
        except (PlanrunError, ConfigError) as error:
            return ToolResult(call.id, f"The {agent.name} subagent failed: {error}", True)
        return ToolResult(call.id, text or "(the subagent gave no answer)")

    def _run(self, agent: AgentDefinition, prompt: str, stop: Cancel) -> str:
        with self._lock:
            number = next(self._numbers)
        label = f"task-{number}-{agent.name}"
        if not self._take_slot(stop):
            return "[the subagent did not start: the user interrupted]"
        try:
            return self._run_in_slot(agent, prompt, label, stop)
        finally:
            self.slots.release()

    def _take_slot(self, stop: Cancel) -> bool:
        """Wait for room in the session's container budget; False once stopped."""
        while not self.slots.acquire(timeout=0.2):
            if stop.is_set():
                return False
        return True

    def _run_in_slot(self, agent: AgentDefinition, prompt: str, label: str, stop: Cancel) -> str:
        mode = PermissionMode.PLAN if agent.read_only else self.approver_mode()
        sandbox = self.sandboxes.read_only() if agent.read_only else self.sandboxes.work()
        names = [n for n in agent.planrun_tools() if n not in INERT_IN_SUBAGENT]
        tools = tools_for(offered(names, self.web))
        model = self.model(label)
        web = WebTools(self.web, model, self.model_id)
        offer = (
            self.mcp.offer(agent.gives_mcp_tool, read_only=agent.read_only) if self.mcp else None
        )
        tools += offer.specs if offer else ()
        config = LoopConfig(
            model=model,
            model_id=self.model_id,
            system_prompt=subagent_prompt(agent, self.memory),
            tools=lambda: tools,
            context=ToolContext(
                frozenset(t.name for t in tools),
                str(self.workspace),
                agent.name,
                mcp_tools=offer.names if offer else frozenset(),
                mcp_read_only=offer.read_only if offer else frozenset(),
            ),
            mode=lambda: mode,
            rules=lambda: Rules(),
            transcript=self.transcripts / f"{label}.transcript.jsonl",
            limits=self.limits,
            label=label,
            host_tools={**web.handlers(), **(offer.host_tools() if offer else {})},
        )
        loop = AgentLoop(
            config,
            sandbox=sandbox,
            approver=self.approver,
            on_event=self.on_event,
            cancel=stop,
        )
        web.on_usage = lambda usage: loop.count_usage(usage, "WebSearch")
        web.on_notice = lambda text: loop.emit("notice", tool="WebSearch", detail=text)
        if self.on_loop is not None:
            self.on_loop(label, loop)
        with sandbox:
            try:
                loop.run(prompt)
            except LimitReached as limit:
                return f"{loop.state.final_text}\n\n[the subagent stopped: {limit}]".strip()
        return loop.state.final_text


def subagent_prompt(agent: AgentDefinition, memory: str) -> str:
    """A Task subagent's system prompt: its agent's, the memory files, and what it is for."""
    return "\n\n".join(part for part in (agent.system_prompt, memory, SUBAGENT_NOTE) if part)
