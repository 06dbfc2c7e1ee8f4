"""A session's two conversations, work and plan: their agent loops (built on first use,
taken up again from their transcripts) and the containers they run in."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_runner import Sandbox
from sandbox_runner.agents.conversation import saved_conversation, transcript_lines
from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.agents.memory import NestedMemory
from sandbox_runner.errors import PlanrunError
from sandbox_runner.session import prompts
from sandbox_runner.session.hooks import SessionHooks
from sandbox_runner.session.todos import Todo, TodoWriteTool
from sandbox_runner.tools.permissions import PermissionMode, Rules
from sandbox_runner.tools.policy import ToolContext
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.web_grant import offered

if TYPE_CHECKING:
    # The loop, the Task runner and the prices load with the first turn (in the worker),
    # not before the session's prompt is drawn.
    from sandbox_runner.agents.loop import AgentLoop
    from sandbox_runner.agents.loop_config import HostTool, LoopConfig
    from sandbox_runner.session.session import Session

PLAN_TOOLS_EXTRA = ("Write", "Edit", "ExitPlanMode", "Task")
"""What the plan session has beyond the Plan agent's own tools."""
WORK_TOOLS_EXTRA = ("TodoWrite",)
"""What the work session has beyond the general-purpose agent's tools (unless its
definition disallows them): the checklist, which the session itself keeps."""
NOT_OFFERED = frozenset({"NotebookEdit", "TodoWrite"})
"""Names an agent file may list that no conversation is offered as such (NotebookEdit
is not implemented; TodoWrite only as WORK_TOOLS_EXTRA)."""


def allowed_task_agents(
    launcher: AgentDefinition, agents: list[AgentDefinition]
) -> list[AgentDefinition]:
    """The agents LAUNCHER's Task tool may launch: all, or those its `Agent(a, b)` names."""
    if launcher.task_agents is None:
        return agents
    allowed = {name.casefold() for name in launcher.task_agents}
    return [agent for agent in agents if agent.name.casefold() in allowed]


class Conversations:
    """The work conversation (the session `<id>`) and the plan conversation (`<id>-plan`)
    of SESSION, each with its own container."""

    def __init__(self, session: Session, task_budget: int) -> None:
        self.session = session
        self._loops: dict[str, AgentLoop] = {}
        self._sandboxes: dict[str, Sandbox] = {}
        self.task_slots = threading.Semaphore(task_budget)
        """The session's container budget beyond its two own: Task subagents, MCP servers."""
        """Task subagents' containers at once, over the whole session (`parallel`)."""

    def loop(self, which: str) -> AgentLoop:
        """The agent loop of WHICH ("work" or "plan"), its conversation resumed from the
        transcript the first time."""
        if which in self._loops:
            return self._loops[which]
        from sandbox_runner.agents.loop import AgentLoop

        session = self.session
        loop = AgentLoop(
            self._config(which),
            sandbox=self.sandbox(which),
            approver=session.ui,
            hooks=SessionHooks(
                which,
                session.notes,
                session.state,
                session.save,
                NestedMemory(session.workspace, session.memory),
            ),
            on_event=session.on_event,
            cancel=session.cancel,
        )
        lines = _read_lines(session.store.transcript(which))
        if lines:
            loop.resume(saved_conversation(lines))
        self._loops[which] = loop
        session.tally.track(which, loop)
        return loop

    def started(self) -> dict[str, AgentLoop]:
        """The loops built so far, by conversation ("work", "plan")."""
        return dict(self._loops)

    def use_model(self) -> None:
        """The session's model changed: each loop calls it from its next request on."""
        for which, loop in self._loops.items():
            loop.config = self._config(which)

    def _config(self, which: str) -> LoopConfig:
        from sandbox_runner.agents.loop_config import LoopConfig

        session, plan = self.session, which == "plan"
        definition = session.registry.get("Plan" if plan else "general-purpose")
        extra = PLAN_TOOLS_EXTRA if plan else work_extras(definition)
        names = [n for n in definition.planrun_tools() if n not in NOT_OFFERED]
        names = offered(names, session.web)
        tools = tools_for(dict.fromkeys([*names, *extra]))
        # The plan session is offered only the MCP tools that read; the work session all,
        # each call of a writing one asked about (and refused while in plan mode).
        servers = session.mcp
        offer = servers.offer(definition.gives_mcp_tool, read_only=plan) if servers else None
        tools += offer.specs if offer else ()
        return LoopConfig(
            model=session.model(which),
            model_id=session.state.model,
            system_prompt=self._system_prompt(which, definition),
            tools=lambda: tools,
            context=ToolContext(
                frozenset(t.name for t in tools),
                str(session.workspace),
                definition.name,
                mcp_tools=offer.names if offer else frozenset(),
                mcp_read_only=offer.read_only if offer else frozenset(),
            ),
            mode=self._mode_of(which),
            rules=self._rules_of(which),
            transcript=session.store.transcript(which),
            limits=session.limits,
            label=session.state.id + ("-plan" if plan else ""),
            host_tools={**self._host_tools(which), **(offer.host_tools() if offer else {})},
            stream_text=True,
        )

    def _system_prompt(self, which: str, definition: AgentDefinition) -> Callable[[], str]:
        agents = prompts.task_agents(self.task_agents(which))
        memory = self.session.memory.prompt(on_demand=True)
        if which == "work":
            checklist = bool(work_extras(definition))
            text = prompts.work_session_prompt(definition, agents, memory, checklist)
            return lambda: text
        plan_file = self.session.plan_file
        return lambda: prompts.plan_session_prompt(
            definition, plan_file.container_path, plan_file.exists(), agents, memory
        )

    def has_checklist(self) -> bool:
        """Whether the work agent is given TodoWrite (its definition may disallow it)."""
        return bool(work_extras(self.session.registry.get("general-purpose")))

    def _mode_of(self, which: str) -> Callable[[], PermissionMode]:
        if which == "plan":
            return lambda: PermissionMode.PLAN
        state = self.session.state
        return lambda: state.permission_mode

    def _rules_of(self, which: str) -> Callable[[], Rules]:
        if which == "plan":
            plan_file = self.session.plan_file
            return lambda: Rules(plan_file=plan_file.container_path)
        return self.session.state.rules

    def task_agents(self, which: str) -> list[AgentDefinition]:
        """The agents WHICH may launch with Task now: read-only ones only in plan mode."""
        registry = self.session.registry
        launcher = registry.get("Plan" if which == "plan" else "general-purpose")
        agents = allowed_task_agents(launcher, registry.all())
        if which == "plan" or self.session.state.permission_mode is PermissionMode.PLAN:
            return [a for a in agents if a.name in prompts.READ_ONLY_DISPATCH]
        return [a for a in agents if a.name in (*prompts.READ_ONLY_DISPATCH, "general-purpose")]

    def _host_tools(self, which: str) -> dict[str, HostTool]:
        from sandbox_runner.session.subagents import TaskRunner

        session = self.session
        runner = TaskRunner(
            agents=lambda: self.task_agents(which),
            sandboxes=session.sandboxes,
            model=session.model,
            model_id=session.state.model,
            workspace=session.workspace,
            transcripts=session.store.directory,
            limits=session.limits,
            approver_mode=lambda: session.state.permission_mode,
            approver=session.ui,
            on_event=session.ui.event,
            slots=self.task_slots,
            memory=session.memory.prompt(),
            web=session.web,
            mcp=session.mcp,
            on_loop=lambda label, loop: session.tally.track(f"{which}/{label}", loop),
        )
        tools: dict[str, HostTool] = {"Task": runner, **self._web_tools(which)}
        if which == "plan":
            tools["ExitPlanMode"] = session.plan_mode.review
        else:
            tools["TodoWrite"] = TodoWriteTool(self._set_todos, session.on_event, session.state.id)
        return tools

    def _web_tools(self, which: str) -> dict[str, HostTool]:
        """WebFetch and WebSearch (with a grant), a search's cost counted in WHICH's."""
        from sandbox_runner.agents.web_tools import WebTools

        session = self.session
        web = WebTools(
            session.web,
            session.model(which),
            session.state.model,
            on_usage=lambda usage: self._loops[which].count_usage(usage, "WebSearch"),
            on_notice=lambda text: self._loops[which].emit("notice", tool="WebSearch", detail=text),
        )
        return dict(web.handlers())

    def _set_todos(self, todos: list[Todo]) -> None:
        self.session.state.todos = [todo.to_saved() for todo in todos]
        self.session.save()

    # ------------------------------------------------------------------ containers

    def sandbox(self, which: str) -> Sandbox:
        """The container of WHICH, started (in the background) the first time."""
        if which not in self._sandboxes:
            from sandbox_runner.sandbox.background import BackgroundStart

            sandboxes = self.session.sandboxes
            inner = (
                sandboxes.plan(self.session.store.plan_dir) if which == "plan" else sandboxes.work()
            )
            sandbox = BackgroundStart(inner)
            sandbox.start()
            self._sandboxes[which] = sandbox
        return self._sandboxes[which]

    def push_plan(self) -> None:
        """Make the plan container's copy of the plan file match the host's."""
        if "plan" in self._sandboxes:
            self.session.plan_file.push(self._sandboxes["plan"])
        else:
            self.sandbox("plan")  # seeded from the staging directory when it starts

    def stop(self) -> None:
        """Remove every container (a failure is a warning: the others go all the same)."""
        for sandbox in self._sandboxes.values():
            try:
                sandbox.stop()
            except PlanrunError as error:
                self.session.ui.show(f"warning: {error}")
        self._sandboxes.clear()


def work_extras(definition: AgentDefinition) -> tuple[str, ...]:
    """WORK_TOOLS_EXTRA but those the work agent's definition disallows."""
    return tuple(name for name in WORK_TOOLS_EXTRA if name not in definition.disallowed_tools)


def _read_lines(path: Path) -> list[str]:
    try:
        return transcript_lines(path.read_text(errors="replace"))
    except FileNotFoundError:
        return []
