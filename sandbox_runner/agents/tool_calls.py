"""Answering a turn's tool calls: the permission check and the approvals, the sandbox or a
host tool, a turn's Task calls side by side, and the end of the turn for what it started."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from sandbox_runner.agents.cancel import Cancel, TurnStop
from sandbox_runner.agents.conversation import NOT_RUN
from sandbox_runner.agents.run_state import Interrupted, TurnEnded
from sandbox_runner.limits import TOOL_TIMEOUT_SECONDS
from sandbox_runner.plans.proposed_patches import PATCH_TOOLS, keep, propose
from sandbox_runner.plans.results import CommandRun
from sandbox_runner.tools.output import cap_result
from sandbox_runner.tools.permissions import Allow, Ask, Deny, PermissionMode, check
from sandbox_runner.tools.policy import Refusal, ToolContext, container_path
from sandbox_runner.types import ExecResult, ToolCall, ToolRequest, ToolResult

if TYPE_CHECKING:
    from sandbox_runner.agents.loop import AgentLoop

MAX_CALLS_PER_TURN = 32
INTERRUPTED = "Not run: the user interrupted the turn before this call."
OUTPUT_CUT = (
    "Not run: your answer reached its output limit of {limit} tokens while this call's "
    "input was being written, so the input is incomplete. Send the call again with less in "
    "it; write a long file in parts (Write the start, then Edit to add the rest)."
)


PATCH_KEPT = (
    "\nThe change to {file} was not made, but it was recorded as a proposed patch of the "
    "plan: the user sees it with the plan and can apply it after accepting. Still describe "
    "it in the plan's steps."
)


class TurnCalls:
    """Answers the tool calls of a loop's turns, each answer logged and told to the UI."""

    def __init__(self, loop: AgentLoop) -> None:
        self.loop = loop
        self._counter_lock = threading.Lock()

    def answer(self, calls: list[ToolCall], cut: ToolCall | None = None) -> None:
        """Run the calls of one turn and add their answers to the conversation; CUT, the
        call the output limit cut short, is answered with an error instead of run.

        Raises:
            Interrupted: the cancel token was set between two calls.
            TurnEnded: a host tool ended the turn (every call has its answer by then).
        """
        loop = self.loop
        results: list[ToolResult] = []
        running = calls[:MAX_CALLS_PER_TURN]
        stop = TurnStop(loop.cancel)
        # Subagents (Task calls) of one turn run side by side; everything else in order.
        parallel = {call.id: call for call in running if call.name == "Task" and call != cut}
        started = self._start_parallel(list(parallel.values()), stop) if len(parallel) > 1 else {}
        try:
            for call in running:
                if loop.cancel.is_set():
                    raise Interrupted("interrupted")
                future = started.get(call.id)
                if call == cut:
                    results.append(self._not_run_cut(call))
                elif future is not None:
                    results.append(future.result())
                else:
                    results.append(self._execute(call, stop))
        except TurnEnded as ended:
            # The subagents this turn started end with it, and every call gets its answer.
            stop.end()
            wait(started.values())
            results.append(ended.result)
            results += [
                self._cut_short(call, started.get(call.id)) for call in running[len(results) :]
            ]
            self._add_results(calls, results)
            raise
        except Interrupted:
            # Every call still gets its answer: the conversation goes on after the interrupt.
            results += [
                self._interrupted(call, started.get(call.id)) for call in running[len(results) :]
            ]
            self._add_results(calls, results)
            raise
        finally:
            stop.end()  # however the turn ends, what it started stops at its next step
        self._add_results(calls, results)

    def _add_results(self, calls: list[ToolCall], results: list[ToolResult]) -> None:
        # Every tool_use needs an answer, but a turn of hundreds of calls is not run; the
        # answers are logged too, so the transcript holds the conversation as it was sent.
        for call in calls[MAX_CALLS_PER_TURN:]:
            not_run = f"Not run: at most {MAX_CALLS_PER_TURN} tool calls per turn."
            results.append(ToolResult(call.id, not_run, True))
            self.loop.log_result(call, results[-1])
        self.loop.state.messages.append(
            {"role": "user", "content": [result.to_block() for result in results]}
        )

    def _not_run_cut(self, call: ToolCall) -> ToolResult:
        limit = self.loop.config.limits.max_output_tokens
        result = ToolResult(call.id, OUTPUT_CUT.format(limit=limit), is_error=True)
        self._record(call, result)
        return result

    def _cut_short(self, call: ToolCall, future: Future[ToolResult] | None) -> ToolResult:
        """The answer to a call after the one that ended the turn: a subagent already
        started answers for itself (it has been stopped); anything else was not run."""
        if future is not None and future.exception() is None:
            return future.result()
        result = ToolResult(call.id, NOT_RUN, is_error=True)
        self.loop.log_result(call, result)
        return result

    def _interrupted(self, call: ToolCall, future: Future[ToolResult] | None) -> ToolResult:
        """The answer to a call the user's interrupt came before: a subagent that already
        finished answers for itself; nothing is waited for."""
        if future is not None and future.done() and future.exception() is None:
            return future.result()
        result = ToolResult(call.id, INTERRUPTED, is_error=True)
        self.loop.log_result(call, result)
        return result

    def _start_parallel(
        self, calls: list[ToolCall], stop: TurnStop
    ) -> dict[str, Future[ToolResult]]:
        pool = ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="task")
        started = {call.id: pool.submit(self._execute, call, stop) for call in calls}
        pool.shutdown(wait=False)
        return started

    def _execute(self, call: ToolCall, stop: Cancel) -> ToolResult:
        loop = self.loop
        with self._counter_lock:
            loop.state.tool_calls += 1
        loop.emit("tool_call", tool=call.name, detail=_brief(call.input))
        config = loop.config
        decision = check(call, self._context(), config.mode(), config.rules())
        if isinstance(decision, Ask):
            decision = self._ask(decision)
        if isinstance(decision, Allow) and call.name in config.host_tools:
            try:
                result = config.host_tools[call.name](call, stop)
            except TurnEnded as ended:
                self._record(call, ended.result)
                raise
        elif isinstance(decision, Allow):
            outcome = loop.sandbox.call(self._within_time_limit(decision.request))
            text = cap_result(call.name, outcome.text or "(no output)")
            failed = command_failure(outcome)
            if failed:
                text = f"{failed}\n{text}"
            result = ToolResult(call.id, text, is_error=not outcome.ok or bool(failed))
            if call.name == "Bash":
                loop.state.commands_run.append(ran(str(call.input.get("command", "")), outcome))
            if call.name in {"Write", "Edit"} and outcome.ok:
                written = "plan_written" if config.mode() is PermissionMode.PLAN else "file_written"
                loop.emit(written, tool=call.name, detail=str(call.input.get("file_path")))
        else:
            message = decision.message + self._propose(call, decision.message)
            result = ToolResult(call.id, message, is_error=True)
            if decision.suggested_command:
                loop.state.suggested_commands.append(decision.suggested_command)
        self._record(call, result)
        return result

    def _propose(self, call: ToolCall, reason: str) -> str:
        """In plan mode, keep a refused Write or Edit of a repository file as a proposed
        patch of the plan; what the model is told about it ("" when nothing was kept)."""
        loop = self.loop
        if loop.config.mode() is not PermissionMode.PLAN or call.name not in PATCH_TOOLS:
            return ""
        context = loop.config.context
        path = container_path(str(call.input.get("file_path", "")), context)
        if isinstance(path, Refusal):
            return ""
        patch = propose(
            call.name, {**call.input, "file_path": path}, context.workspace_host, reason
        )
        with self._counter_lock:
            if patch is None or not keep(loop.state.proposed_patches, patch):
                return ""
        loop.hooks.on_proposed_patch(loop, patch)
        loop.emit("patch_proposed", tool=call.name, detail=patch.file)
        return PATCH_KEPT.format(file=patch.file)

    def _record(self, call: ToolCall, result: ToolResult) -> None:
        self.loop.log_result(call, result)
        self.loop.emit("tool_result", tool=call.name, detail=_outcome(result))

    def _ask(self, ask: Ask) -> Allow | Deny:
        loop = self.loop
        approval = loop.approver.approve(ask)
        loop.hooks.on_approval(loop, ask, approval)
        loop.log(
            "approval", question=ask.question, allowed=approval.allowed, always=approval.always
        )
        if approval.allowed:
            return Allow(ask.request)
        why = f" The user says: {approval.feedback}" if approval.feedback else ""
        return Deny(f"Not approved: the user did not let you {ask.question}.{why}")

    def _context(self) -> ToolContext:
        offered = frozenset(tool.name for tool in self.loop.config.tools())
        return dataclasses.replace(self.loop.config.context, offered=offered)

    def _within_time_limit(self, request: ToolRequest) -> ToolRequest:
        """The request with a timeout that ends no later than the run's own time limit."""
        loop = self.loop
        remaining = loop.config.limits.timeout_seconds - (time.monotonic() - loop.state.started)
        wanted = request.timeout if request.timeout is not None else TOOL_TIMEOUT_SECONDS
        return ToolRequest(request.op, request.args, max(1.0, min(wanted, remaining)))


def _brief(arguments: dict[str, Any]) -> str:
    for key in ("command", "file_path", "pattern", "path", "operation", "url", "query"):
        if key in arguments:
            return str(arguments[key])[:120]
    return ""


def ran(command: str, outcome: ExecResult) -> CommandRun:
    """What the plan records of a command that was sent to the sandbox: its exit status
    (None when it could not start), and whether it was killed for taking too long."""
    code = outcome.exit_code if outcome.ok else None
    return CommandRun(command, code, timed_out=outcome.timed_out)


def command_failure(outcome: ExecResult) -> str:
    """How a command that ran ended badly, as Claude Code's Bash says it (`Exit code 2`,
    a timeout, a signal); "" when it exited 0 or was no command."""
    code = outcome.exit_code
    if not outcome.ok or code is None or (code == 0 and not outcome.timed_out):
        return ""
    if outcome.timed_out:
        return f"Exit code {code} (the command timed out and was killed)"
    if code > 128 and code - 128 in _SIGNALS:
        return f"Exit code {code} (killed by {_SIGNALS[code - 128]})"
    return f"Exit code {code}"


_SIGNALS = {2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}


def _outcome(result: ToolResult) -> str:
    """`ok`, or `error: ` and the first line of what went wrong (for the UI's tool line)."""
    if not result.is_error:
        return "ok"
    first = next((line.strip() for line in result.content.splitlines() if line.strip()), "")
    return f"error: {first[:160]}" if first else "error"
