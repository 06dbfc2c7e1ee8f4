"""A Plan subagent run: the agent loop in plan mode, its plan file, the review, the result."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from sandbox_runner import Model, Sandbox
from sandbox_runner.agents.budget import final_turn_note, low_budget_note
from sandbox_runner.agents.conversation import SavedConversation
from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.agents.events import EventSink
from sandbox_runner.agents.hooks import LoopHooks
from sandbox_runner.agents.loop import AgentLoop
from sandbox_runner.agents.loop_config import LoopConfig
from sandbox_runner.agents.run_state import BudgetReached, Interrupted, LimitReached, PlanPaths
from sandbox_runner.agents.web_tools import WebTools
from sandbox_runner.catalog import WEB_TOOLS
from sandbox_runner.errors import PlanrunError, SandboxError
from sandbox_runner.limits import RunLimits
from sandbox_runner.model.errors import (
    CassetteError,
    ContextBudgetError,
    MalformedAnswerError,
    ModelAPIError,
    ModelError,
    ModelRefusal,
)
from sandbox_runner.plans.files import UnsafeFileError, read_sandbox_file, replace_file, write_new
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.validate import PlanCheck, validate_plan
from sandbox_runner.redact import redact
from sandbox_runner.tools.mcp_offer import McpTools
from sandbox_runner.tools.permissions import PermissionMode, Rules
from sandbox_runner.tools.policy import ToolContext
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.types import ToolSpec, Usage
from sandbox_runner.web_grant import WebGrant, offered


class PlanHooks(LoopHooks):
    """What plan mode adds to the loop: a warning as the budget runs low, a final turn
    without tools, and one round of feedback on an invalid plan."""

    def __init__(self, run: PlanAgentRun) -> None:
        self.run = run

    def notes_before_call(self, loop: AgentLoop) -> list[str]:
        budget = loop.budget()
        if loop.state.warned_low or not (budget.low_on_turns() or budget.low_on_tokens()):
            return []
        loop.state.warned_low = True
        return [low_budget_note(budget, self.run.paths.container_plan_file)]

    def on_stop(self, loop: AgentLoop) -> str | None:
        """Validate the plan once the model stops; feedback gets it one more round."""
        text = self.run.plan_text()
        if loop.state.feedback_sent or not text.strip():
            return None
        check = validate_plan(text, sections=self.run.sections, workspace=self.run.workspace)
        if check.ok:
            return None
        loop.state.feedback_sent = True
        loop.state.feedback_problems = list(check.problems)
        return check.feedback()

    def on_budget_spent(self, loop: AgentLoop, reason: str) -> None:
        """A last call without tools, whose answer becomes the plan if it is one."""
        paths = self.run.paths
        loop.add_note(final_turn_note(reason, paths.container_plan_file))
        response = loop.turn(replace(loop.request(), tool_choice="none"))
        text = response.text.strip() + "\n"
        if not looks_like_plan(text):
            return
        if read_sandbox_file(paths.host_plan_file) is None:
            write_new(paths.host_plan_file, text)
        else:
            replace_file(paths.host_plan_file, text)
        loop.state.final_text = loop.state.host_written_plan = text
        loop.emit("plan_written", detail="from the final turn")


class PlanAgentRun:
    """One Plan subagent run: prompt, loop, plan file, validation, result."""

    def __init__(
        self,
        definition: AgentDefinition,
        model: Model,
        model_id: str,
        sandbox: Sandbox,
        *,
        workspace: Path,
        paths: PlanPaths,
        system_prompt: str,
        sections: list[str],
        limits: RunLimits | None = None,
        label: str = "plan",
        on_event: EventSink | None = None,
        cancel: threading.Event | None = None,
        allowed_tools: frozenset[str] | None = None,
        web: WebGrant | None = None,
        mcp: McpTools | None = None,
        scratch: bool = False,
    ) -> None:
        self.definition = definition
        self.model_id = model_id
        self.workspace = workspace
        self.paths = paths
        self.sections = sections
        self.label = label
        self.web = WebTools(
            web or WebGrant(), model, model_id, on_usage=self._add_usage, on_notice=self._notice
        )
        # Plan mode: only the MCP tools that read are offered; a call of another is
        # refused with guidance and kept as a suggestion.
        offer = mcp.offer(definition.gives_mcp_tool, read_only=True) if mcp else None
        self.tools = [*self._offered_tools(allowed_tools), *(offer.specs if offer else ())]
        rules = Rules(plan_file=paths.container_plan_file, scratch=scratch)
        config = LoopConfig(
            model=model,
            model_id=model_id,
            system_prompt=system_prompt,
            tools=lambda: self.tools,
            context=ToolContext(
                offered=frozenset(tool.name for tool in self.tools),
                workspace_host=str(workspace),
                agent=definition.name,
                mcp_tools=offer.names if offer else frozenset(),
                mcp_read_only=offer.read_only if offer else frozenset(),
            ),
            mode=lambda: PermissionMode.PLAN,
            rules=lambda: rules,
            transcript=paths.transcript,
            limits=limits or RunLimits(),
            label=label,
            host_tools={**self.web.handlers(), **(offer.host_tools() if offer else {})},
        )
        self.loop = AgentLoop(
            config, sandbox=sandbox, hooks=PlanHooks(self), on_event=on_event, cancel=cancel
        )

    def _offered_tools(self, allowed: frozenset[str] | None) -> list[ToolSpec]:
        # A plan agent's definition never lists Write or Edit; it gets them here, scoped by
        # the policy to its plan file, because writing the plan is its whole job.
        # The web tools answer to the user's web grant, not to allowed_tools.
        exploring = [
            t
            for t in self.definition.planrun_tools()
            if allowed is None or t in allowed or t in WEB_TOOLS
        ]
        names = [*offered(exploring, self.web.grant), "Write", "Edit"]
        return tools_for(dict.fromkeys(names))

    def _add_usage(self, usage: Usage) -> None:
        """A web search's model call counts in the run's tokens and cost."""
        self.loop.count_usage(usage, "WebSearch")

    def _notice(self, text: str) -> None:
        self.loop.log("notice", text=text)
        self.loop.emit("notice", tool="WebSearch", detail=text)

    def run(self, requirements: str, earlier: Continuation | None = None) -> PlanResult:
        """Run the loop to the end and return the result; never raises for model or tool
        trouble. With `earlier`, the run goes on with a stopped run's conversation."""
        status, reason, resumable = PlanStatus.COMPLETE, "", False
        try:
            if earlier is None:
                self.loop.run(requirements)
            else:
                self.loop.go_on(earlier.conversation, earlier.note(self.paths))
        except Interrupted as stopped:
            status, reason, resumable = PlanStatus.INCOMPLETE, str(stopped), True
        except BudgetReached as spent:
            status, reason, resumable = PlanStatus.BUDGET, str(spent), True
        except LimitReached as limit:
            status, reason = PlanStatus.INCOMPLETE, str(limit)
        except PlanrunError as error:
            status, reason, resumable = PlanStatus.FAILED, str(error), outside_conversation(error)
        result = replace(
            self._result(status, reason), resumable=resumable, continued=earlier is not None
        )
        self.loop.log("result", **result.to_dict())
        self.loop.emit(
            "failed" if result.status is PlanStatus.FAILED else "finished", detail=result.reason
        )
        return result

    def plan_text(self) -> str:
        """The plan file if the model wrote one, else its final text, written for it."""
        state = self.loop.state
        text = read_sandbox_file(self.paths.host_plan_file)
        final = state.final_text.strip() + "\n"
        corrected = text is not None and text == state.host_written_plan and final != text
        if corrected and looks_like_plan(final):
            # The plan came as text, and the answer to the feedback is a corrected plan.
            replace_file(self.paths.host_plan_file, final)
            state.host_written_plan = final
            self.loop.emit("plan_written", detail="from the final answer")
            return final
        if text is not None and text.strip():
            return text
        if final.strip() and text is None:
            write_new(self.paths.host_plan_file, final)
            state.host_written_plan = final
            self.loop.emit("plan_written", detail="from the final answer")
        return final if final.strip() else ""

    def _redacted(self, text: str) -> str:
        """The plan with what looks like a credential redacted, in the plan file too (the
        draft stays in the run's directory; everything after, the synthesis included,
        reads the redacted plan)."""
        clean = redact(text)
        if clean != text and read_sandbox_file(self.paths.host_plan_file) == text:
            replace_file(self.paths.host_plan_file, clean)
        return clean

    def _result(self, status: PlanStatus, reason: str) -> PlanResult:
        state = self.loop.state
        try:
            text = self._redacted(self.plan_text())
        except (UnsafeFileError, OSError) as error:
            text, status, reason = "", PlanStatus.FAILED, str(error)
        check: PlanCheck | None = None
        if text.strip():
            check = validate_plan(text, sections=self.sections, workspace=self.workspace)
        elif status is PlanStatus.COMPLETE:
            status, reason = PlanStatus.FAILED, "the model wrote no plan"
        if status is PlanStatus.COMPLETE and check is not None and not check.ok:
            reason = "the plan is invalid: " + "; ".join(check.problems)
        return PlanResult(
            label=self.label,
            agent=self.definition.name,
            model=self.model_id,
            status=status,
            reason=reason,
            plan_path=self.paths.host_plan_file if text.strip() else None,
            plan_text=text,
            check=check,
            suggested_commands=list(dict.fromkeys(state.suggested_commands)),
            commands_run=list(state.commands_run),
            proposed_patches=list(state.proposed_patches),
            turns=state.turns,
            tool_calls=state.tool_calls,
            usage=state.usage,
            wall_seconds=round(time.monotonic() - state.started, 3),
            transcript=self.paths.transcript,
            validation_feedback=list(state.feedback_problems),
        )


@dataclass(frozen=True)
class Continuation:
    """A stopped run's conversation, for a new run to go on with."""

    conversation: SavedConversation
    reason: str
    """Why the earlier run stopped."""
    has_plan: bool
    """Whether its plan draft is in the new run's plan file."""

    def note(self, paths: PlanPaths) -> str:
        """What the model is told when its conversation goes on."""
        draft = (
            f"Your plan file {paths.container_plan_file} holds what you had written."
            if self.has_plan
            else f"You had not written {paths.container_plan_file} yet."
        )
        return (
            f"planrun stopped this run ({self.reason}) and has now resumed it in a fresh "
            f"sandbox. The conversation above is intact. {draft} Carry on where you left "
            "off; call a tool again if you need its result."
        )


def outside_conversation(error: PlanrunError) -> bool:
    """Whether a failure came from outside the conversation (the API, the sandbox), so that
    going on with the conversation later makes sense; a request the API refuses as it
    stands (400, too large) would only fail again."""
    if isinstance(error, SandboxError):
        return True
    if isinstance(error, ContextBudgetError | CassetteError | MalformedAnswerError | ModelRefusal):
        return False
    if isinstance(error, ModelAPIError):
        return error.status != 400
    return isinstance(error, ModelError)


def looks_like_plan(text: str) -> bool:
    """A Markdown document with headings, not a remark such as "Fixed."."""
    return sum(1 for line in text.splitlines() if line.startswith("#")) >= 2
