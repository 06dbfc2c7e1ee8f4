"""An interactive session: a work session `<id>` and a plan session `<id>-plan`, one
active, the permission mode, the plan file and its snapshot, and every change saved."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox_runner import Model, Sandbox
from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.agents.conversation import saved_conversation, transcript_lines
from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.agents.hooks import LoopHooks
from sandbox_runner.agents.registry import Registry
from sandbox_runner.agents.run_state import LimitReached, TurnEnded
from sandbox_runner.errors import ConfigError, PlanrunError
from sandbox_runner.limits import RunLimits
from sandbox_runner.session import prompts
from sandbox_runner.session.plan_file import PlanFile
from sandbox_runner.session.state import SessionState, SessionStore
from sandbox_runner.session.ui import PlanReview, SessionSandboxes, SessionUI
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode, Rules
from sandbox_runner.tools.policy import ToolContext, ToolKind
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.types import ToolCall, ToolResult, Usage

if TYPE_CHECKING:
    # The loop, the Task runner and the prices load with the first turn (in the worker),
    # not before the session's prompt is drawn.
    from sandbox_runner.agents.loop import AgentLoop
    from sandbox_runner.agents.loop_config import HostTool

PLAN_TOOLS_EXTRA = ("Write", "Edit", "ExitPlanMode", "Task")
COMPACT_AT = 0.8
"""Compact when a call's input reaches this share of the context budget."""


class Session:
    """The engine of an interactive session; UIs drive it with messages and commands."""

    def __init__(
        self,
        store: SessionStore,
        state: SessionState,
        *,
        workspace: Path,
        registry: Registry,
        sandboxes: SessionSandboxes,
        model: Callable[[str], Model],
        ui: SessionUI,
        limits: RunLimits,
        task_budget: int = 4,
    ) -> None:
        self.store, self.state = store, state
        self.workspace = workspace
        self.registry = registry
        self.sandboxes = sandboxes
        self.model = model
        self.ui = ui
        self.limits = limits
        self.cancel = threading.Event()
        self._task_slots = threading.Semaphore(task_budget)
        """Task subagents' containers at once, over the whole session (`parallel`)."""
        self.plan_file = PlanFile(store.plan_dir, state)
        self._notes: dict[str, list[str]] = {"work": [], "plan": []}
        self._loops: dict[str, AgentLoop] = {}
        self._sandboxes: dict[str, Sandbox] = {}
        self._kickoff: str | None = None
        """The first message of the work session after a plan was accepted."""
        self._mode_lock = threading.Lock()
        self._busy = 0
        self._pending_mode: PermissionMode | None = None
        """A mode asked for during a turn, applied by the turn's thread at its next step."""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Get the containers going ahead of need (a mode switch then waits for nothing)."""
        if self.state.plan_file is not None:
            # What the plan agent wrote before a crash is newer than the plan file.
            self.plan_file.sync_out()
            self.plan_file.stage()
        self._sandbox("work")
        self._sandbox("plan")

    def close(self) -> None:
        """Save the state and remove every container."""
        self.cancel.set()
        self.save()
        for sandbox in self._sandboxes.values():
            try:
                sandbox.stop()
            except PlanrunError as error:
                self.ui.show(f"warning: {error}")
        self._sandboxes.clear()

    def save(self) -> None:
        self.store.save(self.state)

    # ------------------------------------------------------------------ messages

    def send(self, text: str) -> None:
        """A user message to the active session; returns when the agent's turn is over
        (and, when the plan was accepted meanwhile, when the work session's first turn is)."""
        with self._working():
            self._turn(self.state.active, text)
            self.run_pending()

    def run_pending(self) -> None:
        """Start implementing an accepted plan: the work session's kickoff turn."""
        with self._working():
            while self._kickoff is not None:
                text, self._kickoff = self._kickoff, None
                self._turn("work", text)

    @contextmanager
    def _working(self) -> Iterator[None]:
        """While the agent works, mode changes from other threads wait for its next step."""
        with self._mode_lock:
            if not self._busy:
                # A new piece of work; an interrupt from here on stops it, even one that
                # comes before its first model call.
                self.cancel.clear()
            self._busy += 1
        try:
            yield
        finally:
            with self._mode_lock:
                self._busy -= 1
            if not self._busy:
                self._apply_pending_mode()

    def _turn(self, which: str, text: str) -> None:
        loop = self._loop(which)
        loop.state.final_text = ""  # an interrupted turn must not repeat the last answer
        accepted: PlanReview | None = None
        try:
            if loop.state.messages:
                loop.run_turn(text)
            else:
                loop.run(text)
        except PlanAccepted as plan:
            accepted = plan.review
        except LimitReached as limit:
            self.ui.show(f"stopped: {limit}")
        except PlanrunError as error:
            self.ui.show(f"error: {error}")
        finally:
            self._apply_pending_mode()
            self._after_turn(which, accepted)
        if loop.state.final_text.strip() and which == self.state.active:
            self.ui.show(loop.state.final_text.strip())

    def messages(self, which: str) -> list[dict[str, object]]:
        """The conversation of the work or the plan session, as the model sees it."""
        return self._loop(which).state.messages

    def interrupt(self) -> None:
        """Stop the agent's turn (Esc, Ctrl-C): the model call in flight is abandoned."""
        self.cancel.set()

    # ------------------------------------------------------------------ modes

    def set_mode(self, mode: PermissionMode) -> None:
        """Switch to MODE (Shift+Tab, /mode, --mode); it applies from the next tool call."""
        state = self.state
        old = state.permission_mode
        if mode is old:
            return
        if mode is PermissionMode.PLAN:
            self.enter_plan()
            return
        if old is PermissionMode.PLAN:
            self._leave_plan(mode, event="plan_mode_exited")
            return
        state.mode = mode.value
        self._note("work", prompts.mode_changed(mode.value))
        self.store.event("mode_changed", mode=mode.value, previous=old.value)
        self.save()

    @property
    def working(self) -> bool:
        """Whether the agent is in a turn (send or run_pending under way)."""
        return self._busy > 0

    @property
    def wanted_mode(self) -> PermissionMode:
        """The mode the user chose last: the current one, or one a turn will switch to."""
        return self._pending_mode or self.state.permission_mode

    def request_mode(self, mode: PermissionMode) -> None:
        """Switch to MODE from any thread (Shift+Tab while the agent works): at once when
        no turn runs, else the turn's own thread switches before its next tool call."""
        with self._mode_lock:
            if self._busy:
                self._pending_mode = mode
                return
        self.set_mode(mode)

    def _apply_pending_mode(self) -> None:
        with self._mode_lock:
            mode, self._pending_mode = self._pending_mode, None
        if mode is not None:
            self.set_mode(mode)

    def enter_plan(self) -> None:
        """Switch to the plan session; the plan file is chosen once, and snapshotted."""
        state = self.state
        if state.permission_mode is PermissionMode.PLAN:
            return
        again = state.plan_file is not None
        self.plan_file.choose()
        state.snapshot = self.plan_file.read()
        state.previous_mode, state.mode, state.active = state.mode, "plan", "plan"
        self.plan_file.stage()
        self._push_plan_into_sandbox()
        exists = state.snapshot is not None
        note = prompts.entered_plan_mode(self.plan_file.container_path, exists, again)
        self._note("plan", note)
        self.store.event("mode_changed", mode="plan", previous=state.previous_mode)
        self.store.event("plan_mode_entered", plan_file=state.plan_file)
        self.save()

    def exit_plan(self) -> None:
        """/exit-plan: back to the previous mode, the plan untouched, nothing injected."""
        self._require_plan_mode("/exit-plan")
        self._leave_plan(PermissionMode(self.state.previous_mode), event="plan_mode_exited")

    def accept(self, note: str = "", mode: PermissionMode | None = None) -> None:
        """/accept, /apply-plan: keep the plan, switch to the work session, start on it."""
        self._require_plan_mode("/accept")
        self.plan_file.sync_out()
        text = self.plan_file.read() or ""
        target = mode or PermissionMode(self.state.previous_mode)
        if target is PermissionMode.PLAN:
            raise ConfigError("the plan can be applied in default or acceptEdits, not plan")
        self._leave_plan(target, event="")
        path = str(self.plan_file.host_path)
        self._kickoff = prompts.kickoff(path, text, note)
        self.store.event("plan_accepted", plan_file=path, mode=target.value)
        self.save()

    def reject(self) -> None:
        """/reject: restore the plan file from the snapshot, leave plan mode, no trace."""
        self._require_plan_mode("/reject")
        self.plan_file.sync_out()
        rejected = self.plan_file.read()
        self.store.event("plan_rejected", plan_file=self.state.plan_file, rejected=rejected)
        self.plan_file.restore(self.state.snapshot)
        self._push_plan_into_sandbox()
        self._leave_plan(PermissionMode(self.state.previous_mode), event="")

    def _leave_plan(self, mode: PermissionMode, *, event: str) -> None:
        """Back to the work session. It was never in plan mode (the plan session was), so
        nothing is injected there; the plan session hears "Re-entering" if it comes back."""
        state = self.state
        state.mode, state.active = mode.value, "work"
        state.snapshot = None
        self.store.event("mode_changed", mode=mode.value, previous="plan")
        if event:
            self.store.event(event, plan_file=state.plan_file)
        self.save()

    def _require_plan_mode(self, command: str) -> None:
        if self.state.permission_mode is not PermissionMode.PLAN:
            raise ConfigError(f"{command} works in plan mode; enter it with /plan")

    # ------------------------------------------------------------------ the two loops

    def _loop(self, which: str) -> AgentLoop:
        if which in self._loops:
            return self._loops[which]
        from sandbox_runner.agents.loop import AgentLoop
        from sandbox_runner.agents.loop_config import LoopConfig

        plan = which == "plan"
        definition = self.registry.get("Plan" if plan else "general-purpose")
        names = [*definition.effective_tools(), *(PLAN_TOOLS_EXTRA if plan else ())]
        tools = tools_for(dict.fromkeys(n for n in names if n != "NotebookEdit"))
        config = LoopConfig(
            model=self.model(which),
            model_id=self.state.model,
            system_prompt=self._system_prompt(which, definition),
            tools=lambda: tools,
            context=ToolContext(
                frozenset(t.name for t in tools), str(self.workspace), definition.name
            ),
            mode=self._mode_of(which),
            rules=self._rules_of(which),
            transcript=self.store.transcript(which),
            limits=self.limits,
            label=self.state.id + ("-plan" if plan else ""),
            host_tools=self._host_tools(which),
        )
        loop = AgentLoop(
            config,
            sandbox=self._sandbox(which),
            approver=self.ui,
            hooks=_SessionHooks(self, which),
            on_event=self._on_event,
            cancel=self.cancel,
        )
        lines = _read_lines(self.store.transcript(which))
        if lines:
            loop.resume(saved_conversation(lines))
        self._loops[which] = loop
        return loop

    def _system_prompt(self, which: str, definition: AgentDefinition) -> Callable[[], str]:
        agents = prompts.task_agents(self._task_agents(which))
        if which == "work":
            text = prompts.work_session_prompt(definition, agents)
            return lambda: text
        return lambda: prompts.plan_session_prompt(
            definition, self.plan_file.container_path, self.plan_file.exists(), agents
        )

    def _mode_of(self, which: str) -> Callable[[], PermissionMode]:
        if which == "plan":
            return lambda: PermissionMode.PLAN
        return lambda: self.state.permission_mode

    def _rules_of(self, which: str) -> Callable[[], Rules]:
        if which == "plan":
            return lambda: Rules(plan_file=self.plan_file.container_path)
        return self.state.rules

    def _task_agents(self, which: str) -> list[AgentDefinition]:
        agents = self.registry.all()
        if which == "plan" or self.state.permission_mode is PermissionMode.PLAN:
            return [a for a in agents if a.name in prompts.READ_ONLY_DISPATCH]
        return [a for a in agents if a.name in (*prompts.READ_ONLY_DISPATCH, "general-purpose")]

    def _host_tools(self, which: str) -> dict[str, HostTool]:
        from sandbox_runner.session.subagents import TaskRunner

        runner = TaskRunner(
            agents=lambda: self._task_agents(which),
            sandboxes=self.sandboxes,
            model=self.model,
            model_id=self.state.model,
            workspace=self.workspace,
            transcripts=self.store.directory,
            limits=self.limits,
            approver_mode=lambda: self.state.permission_mode,
            approver=self.ui,
            on_event=self.ui.event,
            slots=self._task_slots,
        )
        tools: dict[str, HostTool] = {"Task": runner}
        if which == "plan":
            tools["ExitPlanMode"] = self._exit_plan_mode
        return tools

    def _exit_plan_mode(self, call: ToolCall, stop: Cancel) -> ToolResult:
        """The plan agent says the plan is ready: the user reviews it.

        Raises:
            PlanAccepted: the user accepted it; the plan turn ends there.
        """
        self.plan_file.sync_out()
        text = self.plan_file.read()
        if not text or not text.strip():
            message = f"The plan file {self.plan_file.container_path} is empty; write the plan."
            return ToolResult(call.id, message, True)
        self.store.event("plan_ready", plan_file=self.state.plan_file)
        review = self.ui.review_plan(self.plan_file.host_path, text)
        if not review.accept:
            return ToolResult(call.id, prompts.keep_planning(review.feedback))
        result = ToolResult(call.id, "The user accepted the plan; implementation starts now.")
        raise PlanAccepted(result, review)

    def _sandbox(self, which: str) -> Sandbox:
        if which not in self._sandboxes:
            from sandbox_runner.runs.plan_job import BackgroundStart

            inner = (
                self.sandboxes.plan(self.store.plan_dir)
                if which == "plan"
                else self.sandboxes.work()
            )
            sandbox = BackgroundStart(inner)
            sandbox.start()
            self._sandboxes[which] = sandbox
        return self._sandboxes[which]

    def _push_plan_into_sandbox(self) -> None:
        """Make the plan container's copy of the plan file match the host's."""
        if "plan" in self._sandboxes:
            self.plan_file.push(self._sandboxes["plan"])
        else:
            self._sandbox("plan")  # seeded from the staging directory when it starts

    # ------------------------------------------------------------------ after a turn

    def _after_turn(self, which: str, accepted: PlanReview | None) -> None:
        loop = self._loops[which]
        if which == "plan":
            self.plan_file.sync_out()
        if self.plan_file.problem:
            self.ui.show(f"warning: {self.plan_file.problem}")
            self.plan_file.problem = ""
        if accepted is not None:
            self.accept(accepted.feedback, accepted.mode)
        self._account()
        if loop.state.last_call_tokens > COMPACT_AT * self.limits.context_budget:
            self.compact(which)
        self.save()

    def _account(self) -> None:
        from sandbox_runner.plans.pricing import estimate_cost

        usage = Usage()
        for loop in self._loops.values():
            usage.add(loop.state.usage)
        self.state.tokens = usage.total
        self.state.cost_usd = round(estimate_cost(self.state.model, usage) or 0.0, 6)

    def _on_event(self, event: AgentEvent) -> None:
        if event.kind in ("turn_started", "tool_call"):
            self._apply_pending_mode()  # before the loop reads the mode for this step
        if event.kind == "plan_written" and self.state.plan_file is not None:
            self.plan_file.sync_out()  # the plan file is current after every write
        self.ui.event(event)

    def _note(self, which: str, text: str) -> None:
        self._notes[which].append(text)

    def take_notes(self, which: str) -> list[str]:
        notes, self._notes[which] = self._notes[which], []
        return notes

    def compact(self, which: str | None = None) -> None:
        """Summarise the conversation and replace it with the summary (the full history
        stays in the transcript); mode, plan file and approvals are kept."""
        which = which or self.state.active
        loop = self._loop(which)
        if not loop.state.messages:
            return
        loop.add_user(
            "Summarise this conversation for yourself so that you can continue the work: the "
            "task, what was decided, what was done, what is left, and file paths that matter."
        )
        try:
            response = loop.turn(replace(loop.request(), tool_choice="none"))
        except (LimitReached, PlanrunError) as error:
            self.ui.show(f"could not compact: {error}")
            return
        loop.compact(response.text)
        if which == "plan":
            exists = self.plan_file.exists()
            note = prompts.entered_plan_mode(self.plan_file.container_path, exists, True)
            self._note("plan", note)
        self.ui.show("conversation compacted")


class PlanAccepted(TurnEnded):
    """Control flow: the user accepted the plan from ExitPlanMode, which ends the plan
    turn; the session then switches to the work session, which starts on the plan."""

    def __init__(self, result: ToolResult, review: PlanReview) -> None:
        super().__init__(result)
        self.review = review


class _SessionHooks(LoopHooks):
    def __init__(self, session: Session, which: str) -> None:
        self.session, self.which = session, which

    def notes_before_call(self, loop: AgentLoop) -> list[str]:
        return self.session.take_notes(self.which)

    def on_approval(self, loop: AgentLoop, ask: Ask, approval: Approval) -> None:
        if not approval.always or ask.once_only:
            return
        state = self.session.state
        if ask.kind is ToolKind.EDIT:
            state.approve_edits = True
        elif ask.prefix:
            state.approved_prefixes = sorted({*state.approved_prefixes, ask.prefix})
        else:
            return  # no prefix is safe to approve for good: this once only
        self.session.save()


def _read_lines(path: Path) -> list[str]:
    try:
        return transcript_lines(path.read_text(errors="replace"))
    except FileNotFoundError:
        return []


__all__ = ["PlanReview", "Session", "SessionSandboxes", "SessionUI"]
