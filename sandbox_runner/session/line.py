"""Line mode: a session driven one line at a time (scripts, CI, tests). A fixed interface.

A line starting with `/` is a command, one starting with `!` a shell command the user
runs in the work container, any other line a message; the agent's turn ends
before the next line is read. An approval prints one line starting with `approve?` and
reads the answer from the first line that arrives after it: `y`, `a` (always, this
session), `n` or `n <why>`; a plan review takes `y [default|acceptEdits]` or
`n [feedback]`. Lines that arrived before the question are messages, kept for after the
turn; any other answer is asked again. End of input ends the session cleanly.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.safe_text import one_line, terminal_text
from sandbox_runner.session.approval_view import (
    approval_lines,
    flat,
    question_text,
    size_note,
    source_lines,
)
from sandbox_runner.session.commands import MODE_NAMES, Commands
from sandbox_runner.session.diff_view import after_edit, ansi_lines, use_colour
from sandbox_runner.session.diffs import DiffLine, FileDiff, edit_preview
from sandbox_runner.session.line_input import LineInput
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.todos import TODOS_EVENT
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode
from sandbox_runner.tools.policy import ToolKind
from sandbox_runner.types import ToolRequest

YES, ALWAYS, NO = ("y", "yes"), ("a", "always"), ("n", "no")
ACCEPT_MODES = (PermissionMode.DEFAULT, PermissionMode.ACCEPT_EDITS)


class LineUI:
    """The session's UI over plain text: output lines, answers read from the input."""

    def __init__(self, input: LineInput, out: TextIO, workspace: Path | None = None) -> None:
        self.input = input
        self.out = out
        self._mid_line = False
        """Whether streamed text left the last line open."""
        self.workspace = workspace
        """The repository, whose files an edit's diff is made against."""
        self.colour = use_colour(out)
        self._approved: dict[str, object] | None = None
        """The arguments of the edit approved last: its diff was shown in the question."""

    def diff(self, lines: list[DiffLine]) -> None:
        """A diff (a command's output: /diff), coloured on a terminal."""
        if lines:
            self._end_line()
        for line in ansi_lines(lines, self.colour):
            self.out.write(line + "\n")
        self.out.flush()

    def edited(self, diff: FileDiff, request: ToolRequest) -> None:
        """An edit was made: its summary, and its diff unless the question showed it."""
        shown = request.args == self._approved
        self._approved = None
        lines = after_edit(diff)
        self.diff(lines[:1] if shown else lines)

    def show(self, text: str) -> None:
        for line in text.splitlines() or [""]:
            self._print(line)

    def event(self, event: AgentEvent) -> None:
        if event.kind == "text":
            self._stream(event.detail)
        elif event.kind == "text_end":
            self._end_line()
        elif event.kind == "text_restart":
            self._print("(the answer starts again: the model call is retried)")
        elif event.kind == "tool_call":
            self._print(f"· {event.tool} {one_line(event.detail)}".rstrip())
        elif event.kind == "tool_result" and event.detail.startswith("error"):
            self._print(f"  ✗ {one_line(event.detail.removeprefix('error: '))}")
        elif event.kind == "notice":
            self._print(f"note: {event.detail}")
        elif event.kind == TODOS_EVENT:
            self._print("checklist:" if event.detail else "checklist: (empty)")
            for line in event.detail.splitlines():
                self._print(f"  {line}")

    def approve(self, ask: Ask) -> Approval:
        if ask.once_only:
            always = ""  # a protected file: each edit is its own question
        elif ask.kind is ToolKind.EDIT:
            always = ", a: yes and all edits this session"
        elif ask.prefix:
            what = "calls" if ask.kind is ToolKind.MCP else "commands"
            always = f", a: yes and don't ask again for `{ask.prefix}` {what}"
        else:
            always = ""  # unreadable at a glance, a wrapper, variables: never for good
        about = flat(question_text(ask))
        if ask.kind is ToolKind.COMMAND:
            about += f" ({size_note(str(ask.request.args['command']))})"
        else:
            # What the edit writes, every character visible, before the question.
            if ask.request.args.get("replace_all"):
                about += " (every occurrence)"
            preview = edit_preview(self.workspace, ask.request) if self.workspace else None
            if isinstance(preview, FileDiff):
                for text in ansi_lines(preview.lines, self.colour):
                    self.out.write(f"  {text}\n")
            else:
                for line in approval_lines(ask, preview):
                    self._print("  " + "".join(piece.text for piece in line))
        while True:
            answer = self._ask(f"approve? {about} [y: yes{always}, n [why]]")
            word, _, why = answer.partition(" ")
            if answer.casefold() in YES + ALWAYS and (always or answer.casefold() in YES):
                self._approved = ask.request.args
                return Approval(True, always=answer.casefold() in ALWAYS)
            if word.casefold() in NO:
                return Approval(False, feedback=why.strip())
            self._print(f"not an answer: {flat(answer)[:80]}")

    def review_plan(self, plan_file: Path, text: str) -> PlanReview:
        for line in source_lines(text.rstrip("\n")):
            self._print(line)
        while True:
            answer = self._ask(
                f"approve? plan ready at {plan_file} [y [default|acceptEdits]: accept, "
                "n [feedback]: keep planning]"
            )
            word, _, rest = answer.partition(" ")
            mode = MODE_NAMES.get(rest.strip().casefold()) if rest.strip() else None
            if word.casefold() in YES and (not rest.strip() or mode in ACCEPT_MODES):
                return PlanReview(True, mode)
            if word.casefold() in NO:
                return PlanReview(False, feedback=rest.strip())
            self._print(f"not an answer: {flat(answer)[:80]}")

    def _ask(self, question: str) -> str:
        """QUESTION's answer: the first line that arrives after it ('n' at the end of the
        input). What arrived before stays a message (it was not written to this question)."""
        kept = self.input.set_aside()
        if kept:
            lines = "1 line" if kept == 1 else f"{kept} lines"
            self._print(f"({lines} sent before this question: kept as messages for after the turn)")
        self._print(question)
        answer = self.input.answer()
        return "n" if answer is None else answer.strip()

    def _print(self, line: str) -> None:
        self._end_line()
        self.out.write(one_line(line) + "\n")
        self.out.flush()

    def _stream(self, text: str) -> None:
        """The answer's text as it arrives, printed as itself (no carriage return or
        escape sequence reaches the terminal)."""
        text = terminal_text(text.replace("\r", ""))
        if text:
            self.out.write(text)
            self.out.flush()
            self._mid_line = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self.out.flush()
            self._mid_line = False


def run_lines(session: Session, commands: Commands, ui: LineUI) -> str | None:
    """Read lines until the input ends (or /exit); each is a command (`/…`, `!…`) or a
    message. Returns the session `/resume ID` switches to, if that ended it."""
    while True:
        line = ui.input.next_line()
        if line is None:
            return None
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        if line.startswith(("/", "!")):
            outcome = commands.run(line) if line.startswith("/") else commands.shell(line)
            for text in outcome.lines:
                ui.show(text)
            ui.diff(outcome.diff)
            if outcome.quit:
                return outcome.resume
        else:
            session.send(commands.message(line))
