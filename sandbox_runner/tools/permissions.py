"""Permissions as data plus one decision: the mode, the session's approvals, and
`decide(use, mode, rules) -> Allow | Ask | Deny`.

| call                      | plan                         | default | acceptEdits |
| ---                       | ---                          | ---     | ---         |
| read (Read, Glob, ...)    | allow                        | allow   | allow       |
| read-only command         | allow                        | allow   | allow       |
| other command             | deny, with guidance          | ask     | ask         |
| edit of the plan file     | allow                        | ask     | allow       |
| other edit                | deny, with guidance          | ask     | allow       |
| edit of a protected file  | deny, with guidance          | ask     | ask, each time |
| Task, ExitPlanMode        | allow (the host checks)      | allow   | allow       |
| WebFetch, WebSearch       | allow (offered only with a web grant) | allow | allow  |
| read-only MCP tool        | allow                        | allow   | allow       |
| other MCP tool            | deny, with guidance          | ask     | ask         |

In plan mode nothing is ever offered as an approval: the answer is no, with guidance.
An "always" answer turns an Ask into an Allow for the rest of the session: for edits,
for commands that start with an approved prefix, or for one MCP tool (its full name is
its prefix). It is offered for a command only when
the command reads whole at a glance (one short line, nothing invisible).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from sandbox_runner.protected import workspace_protection
from sandbox_runner.tools.policy import Refusal, ToolContext, ToolKind, ToolUse, translate
from sandbox_runner.types import ToolCall, ToolRequest


class PermissionMode(StrEnum):
    """The permission modes of a session; Shift+Tab cycles them in this order."""

    DEFAULT = "default"
    ACCEPT_EDITS = "acceptEdits"
    PLAN = "plan"

    def next(self) -> PermissionMode:
        """The mode Shift+Tab switches to."""
        order = list(PermissionMode)
        return order[(order.index(self) + 1) % len(order)]


@dataclass(frozen=True)
class Allow:
    """The call may run, as this request to the sandbox."""

    request: ToolRequest


@dataclass(frozen=True)
class Ask:
    """The call may run only if the user says so."""

    request: ToolRequest
    question: str
    """What the user is asked about: `run \\`npm test\\``, `edit src/app.py`."""
    kind: ToolKind
    prefix: str | None = None
    """For a command, the prefix an "always" answer approves (`npm test`, `git commit`)."""
    once_only: bool = False
    """No "always" for this one: a protected file, approved edit by edit."""


@dataclass(frozen=True)
class Deny:
    """The call is refused; the message goes back to the model as an error result."""

    message: str
    suggested_command: str | None = None
    """A command refused in plan mode, kept as a suggestion in the plan's metadata."""


Decision = Allow | Ask | Deny


@dataclass(frozen=True)
class Approval:
    """The user's answer to an Ask."""

    allowed: bool
    always: bool = False
    """Approve calls like this one for the rest of the session."""
    feedback: str = ""
    """With a no: what the agent should do instead."""


SHELL_OPERATORS = frozenset(";&|<>$`()\n")


@dataclass(frozen=True)
class Rules:
    """What a decision depends on beyond the mode: the plan file and the approvals."""

    plan_file: str | None = None
    """Container path of the plan file: the one file plan mode may write."""
    approve_edits: bool = False
    """The user answered "always" to an edit: edits run without asking."""
    approved_prefixes: frozenset[str] = field(default_factory=frozenset)
    """Command prefixes the user answered "always" to."""

    def approves(self, command: str) -> bool:
        """Whether an "always" answer covers this command line (never one that chains,
        pipes, redirects, substitutes, sets variables or goes through a wrapper: that could
        carry any other command along)."""
        if any(char in command for char in SHELL_OPERATORS) or command_prefix(command) is None:
            return False
        words = _words(command)
        return any(words[: len(p.split())] == p.split() for p in self.approved_prefixes)


def check(call: ToolCall, context: ToolContext, mode: PermissionMode, rules: Rules) -> Decision:
    """Translate a call and decide on it: what the agent loop asks for every call."""
    use = translate(call, context)
    if isinstance(use, Refusal):
        return Deny(use.message)
    return decide(use, mode, rules)


def decide(use: ToolUse, mode: PermissionMode, rules: Rules) -> Decision:
    """The decision for one translated call (see the table above); never raises."""
    if use.kind in (ToolKind.READ, ToolKind.HOST):
        return Allow(use.request)
    if use.kind is ToolKind.COMMAND:
        return _command(use, mode, rules)
    if use.kind is ToolKind.MCP:
        return _mcp(use, mode, rules)
    return _edit(use, mode, rules)


def _mcp(use: ToolUse, mode: PermissionMode, rules: Rules) -> Decision:
    if use.read_only:
        return Allow(use.request)
    arguments = json.dumps(use.request.args, ensure_ascii=False, sort_keys=True)
    if mode is PermissionMode.PLAN:
        return Deny(
            f"{use.name} is not allowed in plan mode: its server does not mark it read-only "
            "(readOnlyHint), and nothing may change while planning. Use the read-only tools "
            "to learn what you need, and write this call into the plan as a step instead.",
            suggested_command=f"{use.name} {arguments}",
        )
    if use.name in rules.approved_prefixes:
        return Allow(use.request)
    # The arguments are shown beside the question (session/approval_view.py).
    return Ask(use.request, f"call {use.name}", ToolKind.MCP, prefix=use.name)


def _command(use: ToolUse, mode: PermissionMode, rules: Rules) -> Decision:
    command = use.command or ""
    # Imported at the first Bash decision: the session's prompt is drawn without it.
    from sandbox_runner.tools.bash_policy import classify

    verdict = classify(command)
    if verdict.allowed:
        return Allow(use.request)
    if mode is PermissionMode.PLAN:
        return Deny(verdict.guidance(), suggested_command=command)
    if rules.approves(command):
        return Allow(use.request)
    prefix = command_prefix(command) if at_a_glance(command) else None
    return Ask(use.request, f"run `{command}`", ToolKind.COMMAND, prefix=prefix)


def _edit(use: ToolUse, mode: PermissionMode, rules: Rules) -> Decision:
    path = use.path or ""
    if mode is PermissionMode.PLAN:
        if use.name == "NotebookEdit" or rules.plan_file is None:
            return Deny(
                f"{use.name} is not allowed in plan mode: it is read-only, and this agent "
                "has no plan file."
            )
        if path != rules.plan_file:
            return Deny(
                f"{use.name} is only allowed on the plan file {rules.plan_file} in plan mode; "
                f"{path} is read-only. Describe the change in the plan instead."
            )
        return Allow(use.request)
    protected = workspace_protection(path)
    if protected:
        # In every mode, each time: host tools would run it, or agents obey it.
        question = f"{use.name.lower()} {path}, a protected file ({protected[1]})"
        return Ask(use.request, question, ToolKind.EDIT, once_only=True)
    if mode is PermissionMode.ACCEPT_EDITS or rules.approve_edits:
        return Allow(use.request)
    return Ask(use.request, f"{use.name.lower()} {path}", ToolKind.EDIT)


WRAPPERS = frozenset(
    {"env", "timeout", "nice", "nohup", "xargs", "command", "exec", "builtin", "sudo",
     "doas", "sh", "bash", "dash", "zsh", "eval", "time", "stdbuf", "setsid", "chroot",
     "ionice", "taskset", "flock", "watch", "script", "su", "runuser", "busybox"}
)  # fmt: skip
"""Programs that run another command: "always" for them would approve any command."""


GLANCE_CHARS = 200
"""The longest command an "always" answer is offered for."""
LONG_BLANKS = 8
"""More spaces than this in a row make a command hard to read: they can push the rest of
it out of sight (an approval shows such a run as a count)."""


def at_a_glance(command: str) -> bool:
    """Whether a command reads whole at a glance: one short line of visible characters
    without a long run of blanks. Only such a command is offered an "always" answer: the
    user must have read what they approve for good."""
    return (
        len(command) <= GLANCE_CHARS
        and command.isprintable()
        and " " * (LONG_BLANKS + 1) not in command
    )


def command_prefix(command: str) -> str | None:
    """What "always" approves for a command: its program, and its subcommand if it has one
    (`npm test`, `git commit`, `make`), never its arguments. None when no prefix is safe to
    approve: the command sets variables first (NODE_OPTIONS=... can run anything), runs
    through a wrapper (env, timeout, sh -c ...), or passes git options before its
    subcommand (git -c ...)."""
    words = _words(command)
    if not words or "=" in words[0] or Path(words[0]).name in WRAPPERS:
        return None
    if words[0] == "git" and len(words) > 1 and words[1].startswith("-"):
        return None
    if len(words) > 1 and not words[1].startswith("-") and "/" not in words[1]:
        return " ".join(words[:2])
    return words[0]


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()
