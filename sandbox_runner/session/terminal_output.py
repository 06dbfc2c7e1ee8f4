"""What the terminal session shows while the agent works: its output printed above the
prompt, in order with the approval and plan-review dialogs, and the activity the toolbar
draws."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from prompt_toolkit.application import Application, run_in_terminal
from prompt_toolkit.application.current import set_app

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.safe_text import one_line, terminal_text
from sandbox_runner.session.dialogs import approval_dialog, review_dialog
from sandbox_runner.session.diff_view import after_edit, rich_text
from sandbox_runner.session.diffs import DiffLine, FileDiff, edit_preview
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.stream_view import StreamView
from sandbox_runner.session.terminal_ui import Activity, tool_line
from sandbox_runner.tools.permissions import Approval, Ask
from sandbox_runner.tools.policy import ToolKind
from sandbox_runner.types import ToolRequest

if TYPE_CHECKING:
    from rich.console import Console

T = TypeVar("T")


class TerminalUI:
    """The SessionUI of the terminal: output above the prompt, dialogs in the terminal."""

    def __init__(self) -> None:
        self.activity = Activity()
        self.stream = StreamView()
        """The answer arriving now, drawn above the prompt by the terminal."""
        self._file: IO[str] | None = None
        """Where output goes; None: sys.stdout at the time of writing."""
        self._console: Console | None = None
        self.session: Session | None = None
        self.app: Application[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._diffs: dict[int, list[DiffLine]] = {}
        """By thread: the diff of the edit a call made, shown under its tool line."""
        self._approved: dict[int, dict[str, object]] = {}
        """By thread: the edit approved last (its diff was in the dialog)."""

    @property
    def console(self) -> Console:
        """rich's console, made on the first output: the prompt is drawn without rich, and
        the thread that first prints (the worker, as a rule) pays for importing it."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self._file, highlight=False)
        return self._console

    def write_to(self, file: IO[str]) -> None:
        """Send the output to FILE from now on."""
        self._file, self._console = file, None

    def show(self, text: str) -> None:
        self._print_markdown(text, lambda: None)

    def _print_markdown(self, text: str, then: Callable[[], None]) -> None:
        """TEXT printed as Markdown above the prompt, THEN done in the same redraw."""
        from rich.markdown import Markdown

        # Parsed here, in the caller's thread; the event loop's thread only prints it.
        markdown = Markdown(terminal_text(text))

        def render(console: Console) -> None:
            then()
            if text:
                console.print(markdown)

        self._emit(render)

    def say(self, *lines: str) -> None:
        """Plain lines of planrun's own (a command's output, a tool call)."""
        text = "\n".join(terminal_text(line) for line in lines)
        self._emit(lambda console: console.print(text, markup=False, highlight=False))

    def diff(self, lines: list[DiffLine]) -> None:
        """A diff, coloured (a command's output: /diff)."""
        text = rich_text(lines)
        self._emit(lambda console: console.print(text))

    def event(self, event: AgentEvent) -> None:
        if event.kind.startswith("text"):
            self._streamed(event)
            return
        activity, key, finished = self.activity, f"{event.label}/{event.tool}", None
        with activity.lock:
            if event.kind == "turn_started":
                activity.current = "thinking"
            elif event.kind == "model_retry":
                activity.current = one_line(event.detail)
            elif event.kind == "tool_call":
                activity.current = f"{event.tool} {one_line(event.detail)}".strip()
                activity.calls[key] = activity.current
            elif event.kind == "tool_result":
                finished = activity.calls.pop(key, None)
        if finished is not None:
            self.say(tool_line(event, finished))
        diff = self._diffs.pop(threading.get_ident(), None) if finished is not None else None
        if diff is not None:
            self._emit(lambda console: console.print(rich_text(diff)))
        if event.kind == "notice":
            self.say(f"note: {one_line(event.detail)}")
        self.redraw()

    def _streamed(self, event: AgentEvent) -> None:
        """Text arrives above the prompt as it comes; a complete block is printed as
        Markdown, and leaves the preview in the same redraw."""
        if event.kind == "text":
            self.stream.add(event.detail)
            with self.activity.lock:
                self.activity.current = "writing"
        elif event.kind == "text_restart":
            self.stream.restart()
        elif event.kind == "text_end":
            block = self.stream.end()
            self._print_markdown(event.detail.strip(), lambda: self.stream.drop(block))
        self.redraw()

    def approve(self, ask: Ask) -> Approval:
        session = self.session
        preview = None
        if ask.kind is ToolKind.EDIT and session is not None:
            preview = edit_preview(session.workspace, ask.request)
        approval = self.dialog(lambda: approval_dialog(ask, preview))
        if approval.allowed:
            self._approved[threading.get_ident()] = ask.request.args
        return approval

    def edited(self, diff: FileDiff, request: ToolRequest) -> None:
        """An edit was made: its summary and its diff (collapsed; but the summary alone
        when its dialog showed it), drawn under its tool line."""
        shown = self._approved.pop(threading.get_ident(), None) == request.args
        lines = after_edit(diff)
        self._diffs[threading.get_ident()] = lines[:1] if shown else lines

    def review_plan(self, plan_file: Path, text: str) -> PlanReview:
        restage = self.session.plan_file.edited_by_user if self.session else (lambda: None)
        return self.dialog(lambda: review_dialog(plan_file, text, restage))

    def dialog(self, func: Callable[[], T]) -> T:
        """Run FUNC with the terminal to itself: the prompt is hidden, then redrawn."""
        loop = self.loop
        if loop is None or not loop.is_running() or _on_loop(loop):
            return func()
        future = asyncio.run_coroutine_threadsafe(self._in_terminal(func, True), loop)
        return future.result()

    def _emit(self, render: Callable[[Console], None]) -> None:
        """Print above the prompt, in order with dialogs: both go through run_in_terminal
        (stdout written from a thread would land late, after a dialog, or be overdrawn)."""
        loop, console = self.loop, self.console

        def draw() -> None:
            render(console)

        if loop is None or not loop.is_running():
            draw()
        elif _on_loop(loop):
            run_in_terminal(draw)
        else:
            asyncio.run_coroutine_threadsafe(self._in_terminal(draw, False), loop)

    async def _in_terminal(self, func: Callable[[], T], in_executor: bool) -> T:
        assert self.app is not None
        with set_app(self.app):
            return await run_in_terminal(func, in_executor=in_executor)

    def redraw(self) -> None:
        if self.app is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(self.app.invalidate)

    @contextmanager
    def preparing(self, what: str) -> Iterator[None]:
        """WHAT is shown under way, with a spinner, while the block runs."""
        self.activity.prepare(what)
        self.redraw()
        try:
            yield
        finally:
            self.activity.prepare("")
            self.redraw()


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
