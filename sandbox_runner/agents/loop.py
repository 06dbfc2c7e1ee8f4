"""The agent loop: the model on the host, its tools in the sandbox, every step saved at once.

One loop serves every agent: a Plan subagent of `planrun plan` (plan mode, its plan file
writable, no one to ask), and the plan and work sessions and Task subagents to come. It
reads the permission mode, the approvals and the tool set on every call; an Approver
answers the calls the mode asks about; hooks add what a use needs (the plan review, a
final turn without tools, a mode reminder).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from typing import Any

from sandbox_runner import Sandbox
from sandbox_runner.agents.budget import Budget, charge, cost_stop_reason
from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.agents.conversation import (
    NOT_RUN,
    SavedConversation,
    summary_message,
    withdraw_text,
)
from sandbox_runner.agents.events import AgentEvent, EventSink
from sandbox_runner.agents.hooks import Approver, LoopHooks
from sandbox_runner.agents.loop_config import LoopConfig
from sandbox_runner.agents.model_call import CallStopped, complete_within
from sandbox_runner.agents.run_state import BudgetReached, Interrupted, LimitReached, RunState
from sandbox_runner.agents.streaming import TextStream
from sandbox_runner.agents.tool_calls import TurnCalls
from sandbox_runner.errors import PlanrunError
from sandbox_runner.input_depth import without_deep_inputs
from sandbox_runner.model.errors import ModelRefusal
from sandbox_runner.plans.files import append_line, append_lines
from sandbox_runner.redact import redact_data
from sandbox_runner.tools.permissions import Approval, Ask
from sandbox_runner.types import (
    ModelCall,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    Usage,
)

MAX_PAUSES = 4
"""How many times in a row the loop goes on with an answer the API paused (pause_turn)."""


class Headless:
    """The approver of a run nobody watches: every Ask is a no, with a clear message."""

    def approve(self, ask: Ask) -> Approval:
        return Approval(
            False,
            feedback=f"This run cannot ask for approval, so it will not {ask.question}.",
        )


class AgentLoop:
    """Runs a conversation with the model, executing its tool calls in the sandbox."""

    def __init__(
        self,
        config: LoopConfig,
        *,
        sandbox: Sandbox,
        approver: Approver | None = None,
        hooks: LoopHooks | None = None,
        on_event: EventSink | None = None,
        cancel: Cancel | None = None,
    ) -> None:
        """The loop of CONFIG, its tools run in SANDBOX.

        Args:
            config: what stays the same for the loop's whole life.
            sandbox: where the tools run.
            approver: answers the calls the mode asks about (none: every Ask is a no).
            hooks: what a use of the loop adds (the plan review, a final turn, notes).
            on_event: told of every step, for a UI.
            cancel: set when the user interrupts the run.
        """
        self.config = config
        self.sandbox = sandbox
        self.approver: Approver = approver or Headless()
        self.hooks = hooks or LoopHooks()
        self._on_event = on_event or (lambda event: None)
        self.cancel: Cancel = cancel if cancel is not None else threading.Event()
        self.state = RunState()
        self._calls = TurnCalls(self)

    # ------------------------------------------------------------------ entry points

    def run(self, task: str) -> None:
        """Start the conversation with TASK and go on until the model is done.

        Raises:
            LimitReached: a limit, or the cancel token, ended the run (control flow).
            TurnEnded: a host tool ended the turn (control flow: the plan was accepted).
            PlanrunError: the model or the sandbox failed for good.
        """
        model_id = self.config.model_id
        self.log("system", text=self.system(), tools=self._tool_names(), model=model_id)
        self.add_user(task)
        self._check_context_budget()
        self._loop()

    def go_on(self, saved: SavedConversation, note: str) -> None:
        """Continue the conversation an earlier run left: this loop's transcript starts as a
        copy of its lines, its counters go on from where they were, and NOTE tells the
        model why it stopped. Raises as run() does."""
        append_lines(self.config.transcript, saved.lines)
        self.resume(saved)
        state = self.state
        state.turns, state.tool_calls = saved.turns, saved.tool_calls
        state.usage.add(saved.usage)
        self.add_user(note)
        self._loop()

    def run_turn(self, message: str) -> None:
        """The user's next message in a conversation already under way."""
        self.add_user(message)
        self._loop()

    # ------------------------------------------------------------------ the loop

    def _loop(self) -> None:
        state = self.state
        while True:
            self._check_limits()
            budget = self.budget()
            if reason := budget.final_turn_reason():
                self.hooks.on_budget_spent(self, reason)
                raise LimitReached(f"{reason}; the plan was written in a final turn without tools")
            for note in self.hooks.notes_before_call(self):
                self.add_note(note)
            response = self._answer()
            if response.stop_reason == "refusal":
                self._refused(response)
            calls = response.tool_calls
            if calls:
                self._calls.answer(calls, cut=self._cut_call(response))
                continue
            state.final_text = response.text
            if response.stop_reason == "max_tokens":
                limit = self.config.limits.max_output_tokens
                raise LimitReached(f"the model reached its output limit of {limit} tokens")
            follow_up = self.hooks.on_stop(self)
            if follow_up is None:
                return
            self.add_user(follow_up)

    def _answer(self) -> ModelResponse:
        """The model's answer to the conversation so far. An answer the API paused
        (pause_turn: a long turn of server tools) is sent back as it is, which lets the
        model go on with it, up to MAX_PAUSES times."""
        response = self.turn(self.request())
        for _ in range(MAX_PAUSES):
            if response.stop_reason != "pause_turn":
                return response
            self._check_limits()
            response = self.turn(self.request())
        if response.stop_reason == "pause_turn":
            raise LimitReached(
                f"the API paused the model's answer {MAX_PAUSES + 1} times in a row "
                "(stop_reason pause_turn); planrun stopped going on with it"
            )
        return response

    def _refused(self, response: ModelResponse) -> None:
        """End the turn on a refusal, saying what the API said about it. The refused answer
        leaves the conversation (the transcript keeps it): the API asks for that turn to be
        removed or changed before the conversation goes on."""
        refusal = ModelRefusal.of(response.stop_details)
        self.state.messages[-1] = {
            "role": "assistant",
            "content": [{"type": "text", "text": f"(planrun: {refusal})"}],
        }
        raise refusal

    def _cut_call(self, response: ModelResponse) -> ToolCall | None:
        """The tool call the output limit cut off while its input was being written: its
        input is incomplete (at best), so it is never run."""
        last = response.content[-1] if response.content else {}
        if response.stop_reason != "max_tokens" or last.get("type") != "tool_use":
            return None
        call = response.tool_calls[-1]
        limit = self.config.limits.max_output_tokens
        self.emit(
            "notice",
            tool=call.name,
            detail=f"the output limit of {limit} tokens cut the model's {call.name} call "
            "short: it was not run, and the model was asked to send it again, smaller",
        )
        return call

    def turn(self, request: ModelRequest, *, quiet: bool = False) -> ModelResponse:
        """One model call, recorded in the conversation and the transcript (the answer to
        a paused one goes on with it, in the same assistant message). Its text streams to
        the UI when the loop's config says so, unless QUIET (planrun's own summary)."""
        state = self.state
        state.turns += 1
        self.emit("turn_started")
        shown = TextStream(self.emit) if self.config.stream_text and not quiet else None
        try:
            response = complete_within(
                self.config.model,
                request,
                deadline=state.started + self.config.limits.timeout_seconds,
                cancel=self.cancel,
                on_wait=lambda text: self.emit("waiting", detail=text),
                on_retry=self._retrying,
                on_stream=shown.piece if shown is not None else None,
            )
        except CallStopped as stopped:
            if stopped.reason == "interrupted":
                raise Interrupted("interrupted") from None
            raise LimitReached(self._time_limit_reason() + " " + stopped.reason) from None
        finally:
            if shown is not None:
                shown.close()
        # Before anything walks the answer: a tool input nested thousands of levels deep
        # would end the transcript's json.dumps, or the next request, in a RecursionError.
        response = dataclasses.replace(response, content=without_deep_inputs(response.content))
        state.usage.add(response.usage)
        charge(self.config.limits, self.config.model_id, response.usage)
        state.last_call_tokens = response.usage.total
        last = state.messages[-1] if state.messages else None
        if last is not None and last["role"] == "assistant":
            # Going on with a paused answer: the API reads the two as one turn.
            last["content"] = [*last["content"], *response.content]
        else:
            state.messages.append({"role": "assistant", "content": response.content})
        self.log(
            "assistant",
            content=response.content,
            stop_reason=response.stop_reason,
            usage=vars(response.usage),
        )
        if shown is not None:
            shown.finished(response)
        return response

    def count_usage(self, usage: Usage, source: str) -> None:
        """Tokens a tool spent on a model call of its own (a WebSearch): they count in the
        run's totals, and the transcript keeps them for a resumed run."""
        self.state.usage.add(usage)
        charge(self.config.limits, self.config.model_id, usage)
        self.log("usage", source=source, usage=vars(usage))

    def log_result(self, call: ToolCall, result: ToolResult) -> None:
        """Log the answer to CALL in the transcript."""
        self.log(
            "tool_result",
            call_id=call.id,
            name=call.name,
            input=call.input,
            is_error=result.is_error,
            content=result.content,
        )

    # ------------------------------------------------------------------ limits

    def budget(self) -> Budget:
        """The turns and tokens used so far against the limits."""
        state, limits = self.state, self.config.limits
        return Budget(
            max_turns=limits.max_turns,
            max_tokens=limits.max_total_tokens,
            turns=state.turns,
            tokens=state.usage.total,
            last_call_tokens=state.last_call_tokens,
        )

    def _check_context_budget(self) -> None:
        tokens = self.config.model.count_tokens(self.request())
        budget = self.config.limits.context_budget
        if tokens > budget:
            raise PlanrunError(
                f"the system prompt, tools and requirements take {tokens} tokens, more than the "
                f"model's context budget of {budget}"
            )

    def _check_limits(self) -> None:
        state, limits = self.state, self.config.limits
        if self.cancel.is_set():
            raise Interrupted("interrupted")
        if state.turns >= limits.max_turns:
            raise LimitReached(f"turn limit of {limits.max_turns} reached")
        if state.usage.total >= limits.max_total_tokens:
            raise LimitReached(f"token limit of {limits.max_total_tokens} reached")
        if time.monotonic() - state.started >= limits.timeout_seconds:
            raise LimitReached(self._time_limit_reason())
        if reason := cost_stop_reason(limits, self.config.model_id, state.usage):
            raise BudgetReached(reason)

    def _time_limit_reason(self) -> str:
        return f"time limit of {self.config.limits.timeout_seconds:g} s reached"

    def _retrying(self, call: ModelCall) -> None:
        detail = (
            f"model API: {call.problem}; retrying in {call.retry_wait:.1f} s "
            f"(attempt {call.attempt} of {call.attempts})"
        )
        self.log("retry", detail=detail)
        self.emit("model_retry", detail=detail)

    # ------------------------------------------------------------------ conversation

    def request(self) -> ModelRequest:
        """The next model call: the conversation so far, the tools offered now."""
        return ModelRequest(
            model=self.config.model_id,
            system=self.system(),
            messages=self.state.messages,
            tools=self.config.tools(),
            max_tokens=self.config.limits.max_output_tokens,
        )

    def system(self) -> str:
        """The system prompt as it stands now (a plan session's changes with its plan file)."""
        prompt = self.config.system_prompt
        return prompt() if callable(prompt) else prompt

    def resume(self, saved: SavedConversation) -> None:
        """Take up a conversation saved in this loop's transcript; the calls it left
        without an answer are answered (and logged) as not run."""
        self.state.messages = saved.messages
        for call in saved.unanswered:
            self.log_result(call, ToolResult(call.id, NOT_RUN, is_error=True))

    def compact(self, summary: str) -> None:
        """Replace the conversation with a summary of it; the transcript keeps everything."""
        self.log("compacted", summary=summary)
        self.state.messages = [summary_message(summary)]

    def clear(self) -> None:
        """Start a new conversation (the transcript keeps the old one, a resume takes up
        the new one); what it cost so far is still counted."""
        self.log("cleared")
        self.state.messages = []
        self.state.final_text = ""
        self.state.last_call_tokens = 0

    def add_note(self, text: str) -> None:
        """A note from planrun, added to the user turn the next call sends."""
        self.add_user(text)

    def add_user(self, text: str) -> None:
        """Text for the model: a new user message, or part of the one not yet sent (the
        roles must alternate)."""
        messages = self.state.messages
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "user" and isinstance(last["content"], list):
            last["content"].append({"type": "text", "text": text})
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        self.log("user", text=text)

    def withdraw(self, text: str) -> None:
        """Take back TEXT, the last text added for the model, whose call did not answer it
        (planrun's request for a summary, when that call failed): it must not go out with
        the next message. The transcript says so, for a resume."""
        if withdraw_text(self.state.messages, text):
            self.log("withdrawn", text=text)

    def emit(self, kind: str, *, tool: str | None = None, detail: str = "") -> None:
        """Tell the UI what happened."""
        state = self.state
        self._on_event(
            AgentEvent(
                kind=kind,
                label=self.config.label,
                turn=state.turns,
                tool=tool,
                detail=detail,
                tool_calls=state.tool_calls,
                tokens=state.usage.total,
                elapsed=time.monotonic() - state.started,
            )
        )

    def log(self, kind: str, **fields: Any) -> None:
        """Append one entry to the transcript, flushed at once (a run can resume from it);
        what looks like a credential (a token a tool read, say) is redacted in it."""
        entry = redact_data({"type": kind, "time": time.time(), **fields})
        append_line(self.config.transcript, json.dumps(entry, ensure_ascii=False, default=str))

    def _tool_names(self) -> list[str]:
        return [tool.name for tool in self.config.tools()]
