"""Line mode: a session driven one line at a time (scripts, CI, tests). A fixed interface.

A line starting with `/` is a command, any other line a message; the agent's turn ends
before the next line is read. An approval prints one line starting with `approve?` and
reads the answer from the next line: `y`, `a` (always, this session), `n` or `n <why>`;
a plan review takes `y [mode]` or `n <feedback>`. End of input ends the session cleanly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.safe_text import one_line
from sandbox_runner.session.commands import MODE_NAMES, Commands
from sandbox_runner.session.engine import PlanReview, Session
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode
from sandbox_runner.tools.policy import ToolKind


class LineUI:
    """The session's UI over plain text: output lines, answers read from the input."""

    def __init__(self, read_line: Callable[[], str | None], out: TextIO) -> None:
        self.read_line = read_line
        self.out = out

    def show(self, text: str) -> None:
        for line in text.splitlines() or [""]:
            self._print(line)

    def event(self, event: AgentEvent) -> None:
        if event.kind == "tool_call":
            self._print(f"· {event.tool} {one_line(event.detail)}".rstrip())

    def approve(self, ask: Ask) -> Approval:
        if ask.kind is ToolKind.EDIT:
            always = ", a: yes and all edits this session"
        elif ask.prefix:
            always = f", a: yes and don't ask again for `{ask.prefix}` commands"
        else:
            always = ""  # nothing safe to approve for good (a wrapper, variables)
        self._print(f"approve? {one_line(ask.question)} [y: yes{always}, n [why]]")
        answer = (self.read_line() or "n").strip()
        word, _, rest = answer.partition(" ")
        if word.lower() in ("y", "yes"):
            return Approval(True)
        if word.lower() in ("a", "always"):
            return Approval(True, always=True)
        return Approval(False, feedback=rest.strip())

    def review_plan(self, plan_file: Path, text: str) -> PlanReview:
        self.show(text)
        self._print(
            f"approve? plan ready at {plan_file} [y [default|acceptEdits]: accept, "
            "n <feedback>: keep planning]"
        )
        answer = (self.read_line() or "n").strip()
        word, _, rest = answer.partition(" ")
        if word.lower() in ("y", "yes"):
            mode = MODE_NAMES.get(rest.strip().casefold()) if rest.strip() else None
            if mode is PermissionMode.PLAN:
                mode = None
            return PlanReview(True, mode)
        return PlanReview(False, feedback=rest.strip())

    def _print(self, line: str) -> None:
        self.out.write(one_line(line) + "\n")
        self.out.flush()


def run_lines(session: Session, commands: Commands, ui: LineUI) -> None:
    """Read lines until the input ends (or /quit); each is a command or a message."""
    while True:
        line = ui.read_line()
        if line is None:
            return
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.startswith("/"):
            outcome = commands.run(line)
            for text in outcome.lines:
                ui.show(text)
            if outcome.quit:
                return
        else:
            session.send(commands.message(line))
