"""The agent loop: the model on the host, its tools in the sandbox, every step saved at once."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandbox_runner import Model, Sandbox
from sandbox_runner.agents.budget import Budget, final_turn_note, low_budget_note
from sandbox_runner.agents.definitions import AgentDefinition
from sandbox_runner.agents.events import AgentEvent, EventSink
from sandbox_runner.agents.model_call import CallStopped, complete_within
from sandbox_runner.agents.run_state import LimitReached, PlanPaths, RunState
from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import TOOL_TIMEOUT_SECONDS, RunLimits
from sandbox_runner.plans.files import (
    UnsafeFileError,
    append_line,
    read_sandbox_file,
    replace_file,
    write_new,
)
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.plans.validate import PlanCheck, validate_plan
from sandbox_runner.tools.output import cap_result
from sandbox_runner.tools.policy import Allow, ToolContext, decide
from sandbox_runner.tools.schemas import tools_for
from sandbox_runner.types import (
    ModelCall,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolRequest,
    ToolResult,
    ToolSpec,
)

MAX_CALLS_PER_TURN = 32


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
    ) -> None:
        self.definition = definition
        self.model = model
        self.model_id = model_id
        self.sandbox = sandbox
        self.workspace = workspace
        self.paths = paths
        self.system_prompt = system_prompt
        self.sections = sections
        self.limits = limits or RunLimits()
        self.label = label
        self._on_event = on_event or (lambda event: None)
        self._cancel = cancel or threading.Event()
        self.tools = self._offered_tools(allowed_tools)
        self.context = ToolContext(
            offered=frozenset(tool.name for tool in self.tools),
            plan_file=paths.container_plan_file,
            workspace_host=str(workspace),
            agent=definition.name,
        )
        self.state = RunState()

    def _offered_tools(self, allowed: frozenset[str] | None) -> list[ToolSpec]:
        # A plan agent's definition never lists Write or Edit; it gets them here, scoped by
        # the policy to its plan file, because writing the plan is its whole job.
        exploring = [
            t for t in self.definition.effective_tools() if allowed is None or t in allowed
        ]
        names = [*exploring, "Write", "Edit"]
        return tools_for(dict.fromkeys(names))

    def run(self, requirements: str) -> PlanResult:
        """Run the loop to the end and return the result; never raises for model or tool trouble."""
        status, reason = PlanStatus.COMPLETE, ""
        self._log(
            "system",
            text=self.system_prompt,
            tools=[tool.name for tool in self.tools],
            model=self.model_id,
        )
        self._add_user(requirements)
        try:
            self._check_context_budget()
            self._loop()
        except LimitReached as limit:
            status, reason = PlanStatus.INCOMPLETE, str(limit)
        except PlanrunError as error:
            status, reason = PlanStatus.FAILED, str(error)
        result = self._result(status, reason)
        self._log("result", **result.to_dict())
        self._emit(
            "failed" if result.status is PlanStatus.FAILED else "finished", detail=result.reason
        )
        return result

    def _loop(self) -> None:
        state = self.state
        while True:
            self._check_limits()
            budget = self._budget()
            if reason := budget.final_turn_reason():
                self._final_turn(reason)
                raise LimitReached(f"{reason}; the plan was written in a final turn without tools")
            if not state.warned_low and (budget.low_on_turns() or budget.low_on_tokens()):
                state.warned_low = True
                self._add_note(low_budget_note(budget, self.paths.container_plan_file))
            response = self._turn(self._request())
            calls = response.tool_calls
            if calls:
                self._answer(calls)
                continue
            state.final_text = response.text
            if response.stop_reason == "max_tokens":
                raise LimitReached(
                    f"the model reached its output limit of {self.limits.max_output_tokens} tokens"
                )
            if not self._review_plan():
                return

    def _turn(self, request: ModelRequest) -> ModelResponse:
        """One model call, recorded in the conversation and the transcript."""
        state = self.state
        state.turns += 1
        self._emit("turn_started")
        try:
            response = complete_within(
                self.model,
                request,
                deadline=state.started + self.limits.timeout_seconds,
                cancel=self._cancel,
                on_wait=lambda text: self._emit("waiting", detail=text),
                on_retry=self._retrying,
            )
        except CallStopped as stopped:
            if stopped.reason == "interrupted":
                raise LimitReached("interrupted") from None
            raise LimitReached(self._time_limit_reason() + " " + stopped.reason) from None
        state.usage.add(response.usage)
        state.last_call_tokens = response.usage.total
        state.messages.append({"role": "assistant", "content": response.content})
        self._log(
            "assistant",
            content=response.content,
            stop_reason=response.stop_reason,
            usage=vars(response.usage),
        )
        return response

    def _retrying(self, call: ModelCall) -> None:
        detail = (
            f"model API: {call.problem}; retrying in {call.retry_wait:.1f} s "
            f"(attempt {call.attempt} of {call.attempts})"
        )
        self._log("retry", detail=detail)
        self._emit("model_retry", detail=detail)

    def _time_limit_reason(self) -> str:
        return f"time limit of {self.limits.timeout_seconds:g} s reached"

    def _final_turn(self, reason: str) -> None:
        """A last call without tools, whose answer becomes the plan if it is one."""
        self._add_note(final_turn_note(reason, self.paths.container_plan_file))
        response = self._turn(replace(self._request(), tool_choice="none"))
        text = response.text.strip() + "\n"
        if not _looks_like_plan(text):
            return
        if read_sandbox_file(self.paths.host_plan_file) is None:
            write_new(self.paths.host_plan_file, text)
        else:
            replace_file(self.paths.host_plan_file, text)
        self.state.final_text = self.state.host_written_plan = text
        self._emit("plan_written", detail="from the final turn")

    def _budget(self) -> Budget:
        state, limits = self.state, self.limits
        return Budget(
            max_turns=limits.max_turns,
            max_tokens=limits.max_total_tokens,
            turns=state.turns,
            tokens=state.usage.total,
            last_call_tokens=state.last_call_tokens,
        )

    def _answer(self, calls: list[ToolCall]) -> None:
        results = []
        for call in calls[:MAX_CALLS_PER_TURN]:
            if self._cancel.is_set():
                raise LimitReached("interrupted")
            results.append(self._execute(call))
        # Every tool_use needs an answer, but a turn of hundreds of calls is not run.
        results += [
            ToolResult(call.id, f"Not run: at most {MAX_CALLS_PER_TURN} tool calls per turn.", True)
            for call in calls[MAX_CALLS_PER_TURN:]
        ]
        self._add_tool_results(results)

    def _execute(self, call: ToolCall) -> ToolResult:
        self.state.tool_calls += 1
        self._emit("tool_call", tool=call.name, detail=_brief(call.input))
        decision = decide(call, self.context)
        if isinstance(decision, Allow):
            outcome = self.sandbox.call(self._within_time_limit(decision.request))
            text = cap_result(call.name, outcome.text or "(no output)")
            result = ToolResult(call.id, text, is_error=not outcome.ok)
            if call.name in {"Write", "Edit"} and outcome.ok:
                self._emit("plan_written", tool=call.name, detail=self.paths.container_plan_file)
        else:
            result = ToolResult(call.id, decision.message, is_error=True)
            if decision.suggested_command:
                self.state.suggested_commands.append(decision.suggested_command)
        self._log(
            "tool_result",
            call_id=call.id,
            name=call.name,
            input=call.input,
            is_error=result.is_error,
            content=result.content,
        )
        self._emit("tool_result", tool=call.name, detail="error" if result.is_error else "ok")
        return result

    def _within_time_limit(self, request: ToolRequest) -> ToolRequest:
        """The request with a timeout that ends no later than the run's own time limit."""
        remaining = self.limits.timeout_seconds - (time.monotonic() - self.state.started)
        wanted = request.timeout if request.timeout is not None else TOOL_TIMEOUT_SECONDS
        return replace(request, timeout=max(1.0, min(wanted, remaining)))

    def _review_plan(self) -> bool:
        """Validate the plan once the model stops; True when it gets one more round."""
        text = self._plan_text()
        if self.state.feedback_sent or not text.strip():
            return False
        check = validate_plan(text, sections=self.sections, workspace=self.workspace)
        if check.ok:
            return False
        self.state.feedback_sent = True
        self._add_user(check.feedback())
        return True

    def _plan_text(self) -> str:
        """The plan file if the model wrote one, else its final text, written for it."""
        state = self.state
        text = read_sandbox_file(self.paths.host_plan_file)
        final = state.final_text.strip() + "\n"
        corrected = text is not None and text == state.host_written_plan and final != text
        if corrected and _looks_like_plan(final):
            # The plan came as text, and the answer to the feedback is a corrected plan.
            replace_file(self.paths.host_plan_file, final)
            state.host_written_plan = final
            self._emit("plan_written", detail="from the final answer")
            return final
        if text is not None and text.strip():
            return text
        if final.strip() and text is None:
            write_new(self.paths.host_plan_file, final)
            state.host_written_plan = final
            self._emit("plan_written", detail="from the final answer")
        return final if final.strip() else ""

    def _result(self, status: PlanStatus, reason: str) -> PlanResult:
        state = self.state
        try:
            text = self._plan_text()
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
            turns=state.turns,
            tool_calls=state.tool_calls,
            usage=state.usage,
            wall_seconds=round(time.monotonic() - state.started, 3),
            transcript=self.paths.transcript,
        )

    def _check_context_budget(self) -> None:
        tokens = self.model.count_tokens(self._request())
        if tokens > self.limits.context_budget:
            raise PlanrunError(
                f"the system prompt, tools and requirements take {tokens} tokens, more than the "
                f"model's context budget of {self.limits.context_budget}"
            )

    def _check_limits(self) -> None:
        state, limits = self.state, self.limits
        if self._cancel.is_set():
            raise LimitReached("interrupted")
        if state.turns >= limits.max_turns:
            raise LimitReached(f"turn limit of {limits.max_turns} reached")
        if state.usage.total >= limits.max_total_tokens:
            raise LimitReached(f"token limit of {limits.max_total_tokens} reached")
        if time.monotonic() - state.started >= limits.timeout_seconds:
            raise LimitReached(self._time_limit_reason())

    def _request(self) -> ModelRequest:
        return ModelRequest(
            model=self.model_id,
            system=self.system_prompt,
            messages=self.state.messages,
            tools=self.tools,
            max_tokens=self.limits.max_output_tokens,
        )

    def _add_note(self, text: str) -> None:
        """A note from planrun, added to the user turn the next call sends."""
        last = self.state.messages[-1] if self.state.messages else None
        if last is None or last["role"] != "user" or not isinstance(last["content"], list):
            self._add_user(text)
            return
        last["content"].append({"type": "text", "text": text})
        self._log("user", text=text)

    def _add_user(self, text: str) -> None:
        self.state.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        self._log("user", text=text)

    def _add_tool_results(self, results: list[ToolResult]) -> None:
        self.state.messages.append(
            {"role": "user", "content": [result.to_block() for result in results]}
        )

    def _emit(self, kind: str, *, tool: str | None = None, detail: str = "") -> None:
        state = self.state
        self._on_event(
            AgentEvent(
                kind=kind,
                label=self.label,
                turn=state.turns,
                tool=tool,
                detail=detail,
                tool_calls=state.tool_calls,
                tokens=state.usage.total,
                elapsed=time.monotonic() - state.started,
            )
        )

    def _log(self, kind: str, **fields: Any) -> None:
        entry = {"type": kind, "time": time.time(), **fields}
        append_line(self.paths.transcript, json.dumps(entry, ensure_ascii=False, default=str))


def _looks_like_plan(text: str) -> bool:
    """A Markdown document with headings, not a remark such as "Fixed."."""
    return sum(1 for line in text.splitlines() if line.startswith("#")) >= 2


def _brief(arguments: dict[str, Any]) -> str:
    for key in ("command", "file_path", "pattern", "path", "operation"):
        if key in arguments:
            return str(arguments[key])[:120]
    return ""
