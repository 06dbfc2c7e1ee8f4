"""`!cmd`: a command the user runs in the work container themselves, no approval asked
(they typed it), its output shown and handed to the agent with their next message."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import TOOL_TIMEOUT_SECONDS
from sandbox_runner.session.session import Session
from sandbox_runner.tools.bash_policy import classify
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.types import ExecResult, ToolRequest

MAX_CONTEXT_CHARS = 30_000
"""The most of a command's output the agent is given (the user sees all of it)."""


@dataclass(frozen=True)
class ShellRun:
    """A command the user ran: what it printed, and how it ended."""

    command: str
    output: str
    exit_code: int | None
    problem: str = ""
    """Why it did not run to its end (a timeout, the sandbox's error); empty if it did."""

    @property
    def status(self) -> str:
        """How it ended, in a few words: `exit status 0`, or what went wrong."""
        if self.problem:
            return self.problem
        return f"exit status {self.exit_code}"

    def note(self) -> str:
        """The command and its output, for the agent: context, not a request."""
        output = self.output
        if len(output) > MAX_CONTEXT_CHARS:
            output = (
                output[:MAX_CONTEXT_CHARS]
                + f"\n[… {len(self.output) - MAX_CONTEXT_CHARS} characters cut]"
            )
        return (
            f"The user ran a command in the work container themselves ({self.status}); "
            "its output is here as context for their next message.\n\n"
            f"<bash-input>{self.command}</bash-input>\n<bash-output>\n{output}\n</bash-output>"
        )


def run_shell(session: Session, command: str) -> ShellRun:
    """Run COMMAND in the session's work container (the guard of the workspace applies as
    to any command there) and keep it for the active conversation's next turn.

    Raises:
        ConfigError: no command, or plan mode and a command that is not read-only.
    """
    command = command.strip()
    if not command:
        raise ConfigError("! takes a command: !ls")
    if session.state.permission_mode is PermissionMode.PLAN:
        verdict = classify(command)
        if not verdict.allowed:
            raise ConfigError(
                f"plan mode is read-only, so `{verdict.offending}` was not run: {verdict.reason}. "
                "Leave plan mode (shift+tab, /exit-plan) to run it"
            )
    sandbox = session.conversations.sandbox("work")
    result = sandbox.call(ToolRequest("bash", {"command": command}, timeout=TOOL_TIMEOUT_SECONDS))
    run = ShellRun(command, result.output, result.exit_code, _problem(result))
    session.notes.add(session.state.active, run.note())
    session.store.event("user_command", command=command, exit_code=run.exit_code)
    return run


def _problem(result: ExecResult) -> str:
    if result.timed_out:
        return f"stopped after {TOOL_TIMEOUT_SECONDS:.0f} seconds"
    if not result.ok:
        return f"error: {result.error or 'the command could not run'}"
    return ""
