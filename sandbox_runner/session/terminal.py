"""The terminal session: a prompt that stays usable while the agent works in a worker
thread, Shift+Tab through the modes, the agent's work printed above the prompt."""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application, run_in_terminal
from prompt_toolkit.application.current import set_app
from prompt_toolkit.filters import Condition, has_completions
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.errors import PlanrunError
from sandbox_runner.safe_text import one_line, terminal_text
from sandbox_runner.session.commands import Commands
from sandbox_runner.session.dialogs import approval_dialog, review_dialog
from sandbox_runner.session.session import PlanReview, Session
from sandbox_runner.session.terminal_ui import STYLE, Activity, SlashCompleter, tool_line, toolbar
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode

if TYPE_CHECKING:
    from rich.console import Console

T = TypeVar("T")
QUIT_HINT = "press Ctrl-C again to quit (the session is kept: planrun --continue)"


class TerminalUI:
    """The SessionUI of the terminal: output above the prompt, dialogs in the terminal."""

    def __init__(self) -> None:
        self.activity = Activity()
        self._file: IO[str] | None = None
        """Where output goes; None: sys.stdout at the time of writing."""
        self._console: Console | None = None
        self.session: Session | None = None
        self.app: Application[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

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
        from rich.markdown import Markdown

        # Parsed here, in the caller's thread; the event loop's thread only prints it.
        markdown = Markdown(terminal_text(text))
        self._emit(lambda console: console.print(markdown))

    def say(self, *lines: str) -> None:
        """Plain lines of planrun's own (a command's output, a tool call)."""
        text = "\n".join(terminal_text(line) for line in lines)
        self._emit(lambda console: console.print(text, markup=False, highlight=False))

    def event(self, event: AgentEvent) -> None:
        activity, key, finished = self.activity, f"{event.label}/{event.tool}", None
        with activity.lock:
            activity.tokens = max(activity.tokens, event.tokens)
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
        self.redraw()

    def approve(self, ask: Ask) -> Approval:
        return self.dialog(lambda: approval_dialog(ask))

    def review_plan(self, plan_file: Path, text: str) -> PlanReview:
        restage = self.session.plan_file.stage if self.session else (lambda: None)
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


class Worker:
    """One daemon thread that drives the engine (turns, commands, mode changes) in order,
    so the prompt never waits for the agent."""

    def __init__(self, on_error: Callable[[str], None]) -> None:
        self.jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.on_error = on_error
        self.thread = threading.Thread(target=self._run, name="session-worker", daemon=True)
        self.thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self.jobs.put(job)

    @property
    def idle(self) -> bool:
        return self.jobs.unfinished_tasks == 0

    def stop(self, timeout: float) -> None:
        self.jobs.put(None)
        self.thread.join(timeout)

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            try:
                job()
            except PlanrunError as error:
                self.on_error(f"error: {error}")
            except Exception as error:  # a bug must not kill the session's only worker
                self.on_error(f"internal error: {error!r}")
            finally:
                self.jobs.task_done()


class Terminal:
    """The prompt, its key bindings and toolbar, over a session and its commands."""

    def __init__(
        self,
        session: Session,
        commands: Commands,
        ui: TerminalUI,
        *,
        history: History | None = None,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self.session, self.commands, self.ui = session, commands, ui
        self.worker = Worker(ui.say)
        self.hint = ""
        self.quit_armed = False
        self._queued = self._dropped = 0
        """Jobs queued so far, and the last one an interrupt dropped."""
        self._target: PermissionMode | None = None
        """A mode chosen with Shift+Tab that the worker has not applied yet."""
        self._first: Callable[[], None] | None = None
        """The job that gets the session ready, until the worker is given it."""
        self.prompt: PromptSession[str] = PromptSession(
            message=self._message,
            history=history or InMemoryHistory(),
            completer=SlashCompleter(),
            complete_while_typing=True,
            bottom_toolbar=self._toolbar,
            key_bindings=self._bindings(),
            style=STYLE,
            input=input,
            output=output,
        )
        self.prompt.default_buffer.on_text_changed += self._disarm

    def _disarm(self, _: object) -> None:
        """Typing after a Ctrl-C: the next Ctrl-C no longer quits."""
        if self.quit_armed and not self.ui.activity.busy:
            self.quit_armed, self.hint = False, ""

    @property
    def shown_mode(self) -> PermissionMode:
        return self._target or self.session.wanted_mode

    def cycle_mode(self) -> None:
        """Shift+Tab: the badge changes at once; the engine switches in the background
        (entering plan mode may talk to a container), or at the turn's next tool call."""
        target = self.shown_mode.next()
        self.quit_armed, self.hint = False, ""
        if self.session.working:
            self.session.request_mode(target)
            return
        self._target = target
        self._submit(lambda: self._apply_mode(target))

    def _apply_mode(self, target: PermissionMode) -> None:
        try:
            had_plan_file = self.session.state.plan_file is not None
            self.session.request_mode(target)
            if target is PermissionMode.PLAN and not had_plan_file and self.session.state.plan_file:
                self.ui.say(f"plan mode: the plan file is {self.session.state.plan_file}")
        finally:
            if self._target is target:
                self._target = None
            self.ui.redraw()

    def _toolbar(self) -> Any:
        width = self.prompt.app.output.get_size().columns
        return toolbar(self.session, self.shown_mode, self.ui.activity, self.hint, width)

    def _message(self) -> Any:
        plan = self.shown_mode is PermissionMode.PLAN
        return [("class:prompt", "plan › " if plan else "› ")]

    def _bindings(self) -> KeyBindings:
        bindings = KeyBindings()
        working = Condition(lambda: self.ui.activity.busy)

        @bindings.add("s-tab", filter=~has_completions)
        @bindings.add("escape", "m")
        def _cycle(event: KeyPressEvent) -> None:
            self.cycle_mode()

        @bindings.add("escape", "enter")
        @bindings.add("c-j")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("escape", filter=working)
        def _interrupt(event: KeyPressEvent) -> None:
            self.interrupt()
            self.hint = "interrupting…"

        @bindings.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if self.ui.activity.busy:
                self.interrupt()
                self.quit_armed, self.hint = True, "interrupting… " + QUIT_HINT
            elif buffer.text:
                buffer.reset()
            elif self.quit_armed:
                event.app.exit(exception=EOFError())
            else:
                self.quit_armed, self.hint = True, QUIT_HINT

        return bindings

    async def run(self, first: Callable[[], None] | None = None) -> None:
        """Read lines until Ctrl-D, a second Ctrl-C or /quit; the agent works meanwhile.
        FIRST (starting containers, say) runs in the worker once the prompt is drawn,
        before anything typed there."""
        self.ui.loop, self.ui.app = asyncio.get_running_loop(), self.prompt.app
        self._first = first
        # Not sooner: the worker's imports would slow the first drawing of the prompt.
        self.prompt.app.after_render += self._start_first
        ticker = asyncio.create_task(self._tick())
        try:
            while True:
                try:
                    line = await self.prompt.prompt_async()
                except EOFError:
                    return
                if not self.accept_line(line):
                    return
        finally:
            ticker.cancel()
            self.session.interrupt()
            await asyncio.get_running_loop().run_in_executor(None, self.worker.stop, 10.0)

    def accept_line(self, line: str) -> bool:
        """Act on a line the user entered; False when the session should end."""
        self.quit_armed, self.hint = False, ""
        text = line.strip()
        if not text:
            return True
        if text.startswith("/"):
            name = text.split()[0]
            if name == "/quit":
                return False
            if name in ("/status", "/help"):  # read-only: answer now, even mid-turn
                self._print(self.commands.run(text).lines)
                return True
            self._queue(lambda: self._print(self.commands.run(text).lines))
            return True
        message = line
        self._queue(lambda: self.session.send(self.commands.message(message)))
        return True

    def interrupt(self) -> None:
        """Esc, Ctrl-C: stop the turn, and drop what was queued behind it."""
        self._dropped = self._queued
        self.session.interrupt()

    def _start_first(self, _: object = None) -> None:
        self.prompt.app.after_render -= self._start_first
        first, self._first = self._first, None
        if first is not None:
            self.worker.submit(first)

    def _submit(self, job: Callable[[], None]) -> None:
        """JOB to the worker, after the session's first job, whenever JOB comes."""
        self._start_first()
        self.worker.submit(job)

    def _queue(self, job: Callable[[], None]) -> None:
        if self.ui.activity.busy:
            self.ui.say("(queued: it runs when the agent's turn is over)")
        self._queued += 1
        number = self._queued

        def run() -> None:
            if number <= self._dropped:
                return  # interrupted before it started
            self.ui.activity.begin()
            try:
                job()
            finally:
                self.ui.activity.end()
                if self.hint.startswith("interrupting"):
                    self.hint = QUIT_HINT if self.quit_armed else ""
                self.ui.redraw()

        self._submit(run)

    def _print(self, lines: list[str]) -> None:
        if lines:
            self.ui.say(*lines)

    async def _tick(self) -> None:
        """Keep the spinner turning while the agent works or the session starts."""
        while True:
            await asyncio.sleep(0.1)
            if self.ui.activity.busy or self.ui.activity.preparing:
                self.prompt.app.invalidate()


def run_terminal(
    session: Session,
    commands: Commands,
    ui: TerminalUI,
    history: Path,
    first: Callable[[], None] | None = None,
) -> None:
    """The full terminal session on a real terminal, until the user quits."""
    # planrun's own output goes straight to the terminal (in run_in_terminal); anything
    # else printed meanwhile lands above the prompt.
    ui.write_to(sys.stdout)
    with patch_stdout(raw=True):
        terminal = Terminal(session, commands, ui, history=FileHistory(str(history)))
        asyncio.run(terminal.run(first))


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


__all__ = ["Terminal", "TerminalUI", "run_terminal"]
