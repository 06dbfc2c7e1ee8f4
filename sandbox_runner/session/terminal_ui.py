"""What the terminal session draws around the prompt: the mode badge and the bottom
toolbar, slash-command completion, the agent's progress (the dialogs are in dialogs.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.styles import Style

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.safe_text import one_line
from sandbox_runner.session.commands import COMMANDS
from sandbox_runner.tools.permissions import PermissionMode

if TYPE_CHECKING:
    from sandbox_runner.session.session import Session

BADGES: dict[PermissionMode, tuple[str, str]] = {
    PermissionMode.DEFAULT: ("class:badge.default", "default mode (shift+tab to cycle)"),
    PermissionMode.ACCEPT_EDITS: (
        "class:badge.accept-edits",
        "⏵⏵ accept edits on (shift+tab to cycle)",
    ),
    PermissionMode.PLAN: ("class:badge.plan", "⏸ plan mode on (shift+tab to cycle)"),
}
STYLE = Style.from_dict(
    {
        # The toolbar's default is reverse video, which would turn the badge colours
        # into backgrounds; plain text on the terminal's background reads better.
        "bottom-toolbar": "noreverse",
        "badge.default": "fg:ansibrightblack",
        "badge.accept-edits": "fg:ansimagenta bold",
        "badge.plan": "fg:ansicyan bold",
        "tooltip": "fg:ansicyan",
        "facts": "fg:ansibrightblack",
        "spinner": "fg:ansiyellow",
        "hint": "fg:ansiyellow",
        "todo": "",
        "todo.active": "fg:ansiyellow bold",
        "todo.done": "fg:ansibrightblack",
        "todo.more": "fg:ansibrightblack",
    }
)
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
ARGUMENTS: dict[str, list[str]] = {
    "/mode": ["default", "acceptEdits", "plan"],
    "/apply-plan": ["acceptEdits", "default"],
    "/save-plan": ["PLAN.md", "--force"],
}


class SlashCompleter(Completer):
    """Completes `/command` names (dashes included) and their arguments."""

    def __init__(self) -> None:
        self.paths = PathCompleter(expanduser=True)

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        if " " not in text:
            for name, meta in COMMANDS.items():
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text), display_meta=meta)
            return
        command, _, argument = text.partition(" ")
        if command == "/attach":
            yield from self.paths.get_completions(Document(argument), complete_event)
            return
        word = argument.rsplit(" ", 1)[-1]
        for value in ARGUMENTS.get(command, []):
            if value.startswith(word) and value != word:
                yield Completion(value, start_position=-len(word))


class Activity:
    """The turn under way, as the toolbar shows it: elapsed time, the step now; before the
    first turn, what the session is still getting ready."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: float | None = None
        self.current = ""
        self.calls: dict[str, str] = {}
        self.preparing = ""
        """What the session gets ready behind the prompt (containers, the model client);
        a message sent meanwhile waits for it."""
        self._prepared_since = time.monotonic()

    def begin(self) -> None:
        with self.lock:
            self.started, self.current = time.monotonic(), "thinking"

    def end(self) -> None:
        with self.lock:
            self.started, self.current = None, ""
            self.calls.clear()

    def prepare(self, what: str) -> None:
        """Show WHAT as under way ("" when nothing is)."""
        with self.lock:
            if what and not self.preparing:
                self._prepared_since = time.monotonic()
            self.preparing = what

    @property
    def busy(self) -> bool:
        return self.started is not None

    def line(self, tokens: int) -> str:
        """The spinner's line; TOKENS is the session's count, the toolbar's too."""
        with self.lock:
            if self.started is None:
                if not self.preparing:
                    return ""
                elapsed = time.monotonic() - self._prepared_since
                return f"{SPINNER[int(elapsed * 10) % len(SPINNER)]} {self.preparing}…"
            elapsed = time.monotonic() - self.started
            frame = SPINNER[int(elapsed * 10) % len(SPINNER)]
            return f"{frame} {self.current} · {elapsed:.0f}s · {tokens:,} tokens · esc to interrupt"


def toolbar(
    session: Session, shown: PermissionMode, activity: Activity, hint: str, width: int = 80
) -> Any:
    """The bottom toolbar: progress (while the agent works), the badge and the footer
    facts, and in plan mode the tooltip that says what plan mode means and how to leave."""
    fragments: StyleAndTextTuples = []
    tokens, cost = session.totals()  # one count, read once for the spinner and the facts
    progress = activity.line(tokens)
    if progress:
        fragments += [("class:spinner", one_line(progress)[:200] + "\n")]
    style, text = BADGES[shown]
    state = session.state
    facts = f"{state.model} · {tokens:,} tokens · ${cost:.2f} · {state.id}"
    fragments += [(style, text), ("", "  "), ("class:facts", facts)]
    if shown is not session.state.permission_mode:
        fragments += [("class:hint", "  (switching at the next step)")]
    if shown is PermissionMode.PLAN and state.plan_file:
        parts = ["read-only", f"edits only to {state.plan_file}", "/apply-plan to implement"]
        parts += ["/exit-plan to leave", "shift+tab to cycle"]
        for line in wrap_parts(parts, width):
            fragments += [("", "\n"), ("class:tooltip", line)]
    if hint:
        fragments += [("", "\n"), ("class:hint", hint)]
    return fragments


def wrap_parts(parts: list[str], width: int) -> list[str]:
    """PARTS joined with ` · ` into lines of at most WIDTH (a long part gets a line)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return lines


def tool_line(event: AgentEvent, call: str) -> str:
    """One line per tool call: the tool, its argument, and how it ended."""
    failed = event.detail.startswith("error")
    outcome = f"✗ {event.detail.removeprefix('error: ')}" if failed else "✓"
    return one_line(f"● {call} {outcome}")[:300]
