"""The terminal session: a prompt that stays usable while the agent works in a worker
thread, Shift+Tab through the modes (the agent's work is printed above the prompt by
terminal_output.py)."""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import ThreadedCompleter, merge_completers
from prompt_toolkit.filters import Condition, has_completions
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout

from sandbox_runner.errors import PlanrunError
from sandbox_runner.session.commands import Commands, Outcome, come_back
from sandbox_runner.session.mention_completion import MentionCompleter
from sandbox_runner.session.path_index import PathIndex
from sandbox_runner.session.session import Session
from sandbox_runner.session.terminal_output import TerminalUI
from sandbox_runner.session.terminal_ui import STYLE, SlashCompleter, toolbar
from sandbox_runner.session.todo_view import compact_fragments
from sandbox_runner.session.todos import load_todos
from sandbox_runner.tools.permissions import PermissionMode

PROMPT_ROWS = 8
"""Rows kept for the prompt and the toolbar below an answer that streams in."""
ESCAPE_SEQUENCE_WAIT = 0.1
"""Seconds a lone Esc byte waits for the rest of a key's escape sequence (a terminal sends
one whole; prompt_toolkit's default is half a second)."""
ESCAPE_WAIT_IDLE, ESCAPE_WAIT_WORKING = 1.0, 0.1
"""Seconds Esc waits for a key that makes it Esc-Enter or Alt+M: idle, and while the agent
works (when a lone Esc interrupts)."""
QUIT_HINT = "press Ctrl-C again to quit (the session is kept: planrun --continue)"


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
        self.resume_to: str | None = None
        """The session `/resume ID` switches to when this one ends."""
        self._queued = self._dropped = 0
        """Jobs queued so far, and the last one an interrupt dropped."""
        self._waiting: dict[int, str] = {}
        """The lines typed while the agent worked and not started yet, by job number: an
        interrupt gives them back in the input."""
        self._queue_lock = threading.Lock()
        self._target: PermissionMode | None = None
        """A mode chosen with Shift+Tab that the worker has not applied yet."""
        self._first: Callable[[], None] | None = None
        """The job that gets the session ready, until the worker is given it."""
        self.prompt: PromptSession[str] = PromptSession(
            message=self._message,
            history=history or InMemoryHistory(),
            completer=merge_completers(
                [
                    SlashCompleter(),
                    ThreadedCompleter(MentionCompleter(PathIndex(session.workspace))),
                ]
            ),
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
        size = self.prompt.app.output.get_size()
        todos = load_todos(self.session.state.todos)
        checklist = compact_fragments(todos, size.columns, busy=self.ui.activity.busy)
        # The answer streaming in sits just above the checklist and the prompt, leaving
        # room for the toolbar.
        rows = max(3, size.rows - PROMPT_ROWS - len(checklist))
        streaming = self.ui.stream.preview(size.columns, rows)
        above = [("class:stream", streaming + "\n")] if streaming else []
        return [*above, *checklist, ("class:prompt", "plan › " if plan else "› ")]

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
        """Read lines until Ctrl-D, a second Ctrl-C or /exit; the agent works meanwhile.
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
        if text.startswith("!"):
            self._queue(lambda: self._print(self.commands.shell(text)), line)
            return True
        if text.startswith("/"):
            name = text.split()[0]
            if name in ("/exit", "/quit"):
                return False  # run_terminal says how to come back
            if name == "/resume" and len(text.split()) > 1:
                return self._switch(text)
            if name in ("/status", "/help", "/cost"):  # read-only: answer now, even mid-turn
                self._print(self.commands.run(text))
                return True
            self._queue(lambda: self._print(self.commands.run(text)), line)
            return True
        message = line
        self._queue(lambda: self.session.send(self.commands.message(message)), line)
        return True

    def interrupt(self) -> None:
        """Esc, Ctrl-C: stop the turn; what was typed behind it does not run, but comes
        back in the input, to send again (Enter) or change."""
        with self._queue_lock:
            self._dropped = self._queued
            lines = [self._waiting.pop(number) for number in sorted(self._waiting)]
        self.session.interrupt()
        if lines:
            self._give_back(lines)

    def _give_back(self, lines: list[str]) -> None:
        buffer = self.prompt.default_buffer
        text = "\n".join([*lines, buffer.text] if buffer.text else lines)
        buffer.text, buffer.cursor_position = text, len(text)
        what = "message is" if len(lines) == 1 else f"{len(lines)} messages are"
        self.ui.say(f"(interrupted: your queued {what} back in the input; Enter sends it)")

    def _start_first(self, _: object = None) -> None:
        self.prompt.app.after_render -= self._start_first
        first, self._first = self._first, None
        if first is not None:
            self.worker.submit(first)

    def _submit(self, job: Callable[[], None]) -> None:
        """JOB to the worker, after the session's first job, whenever JOB comes."""
        self._start_first()
        self.worker.submit(job)

    def _queue(self, job: Callable[[], None], line: str) -> None:
        if self.ui.activity.busy:
            self.ui.say("(queued: it runs when the agent's turn is over)")
        with self._queue_lock:
            self._queued += 1
            number = self._queued
            self._waiting[number] = line

        def run() -> None:
            with self._queue_lock:
                if number <= self._dropped:
                    return  # interrupted before it started: given back in the input
                del self._waiting[number]
            self.ui.activity.begin()
            try:
                job()
            finally:
                self.ui.activity.end()
                if self.hint.startswith("interrupting"):
                    self.hint = QUIT_HINT if self.quit_armed else ""
                self.ui.redraw()

        self._submit(run)

    def _switch(self, text: str) -> bool:
        """`/resume ID`: end this session for that one, once the agent is idle."""
        if self.ui.activity.busy:
            self.ui.say("the agent is working: press Esc first, then /resume")
            return True
        outcome = self.commands.run(text)
        self.ui.say(*outcome.lines[:1])
        self.resume_to = outcome.resume
        return outcome.resume is None

    def _print(self, outcome: Outcome) -> None:
        if outcome.lines:
            self.ui.say(*outcome.lines)
        if outcome.diff:
            self.ui.diff(outcome.diff)

    async def _tick(self) -> None:
        """Keep the spinner turning while the agent works or the session starts; while it
        works, a lone Esc interrupts at once instead of waiting to see if Enter or M
        follows (Esc then Enter still makes a new line when the agent is idle)."""
        app = self.prompt.app
        app.ttimeoutlen = ESCAPE_SEQUENCE_WAIT
        while True:
            await asyncio.sleep(0.1)
            busy = self.ui.activity.busy
            app.timeoutlen = ESCAPE_WAIT_WORKING if busy else ESCAPE_WAIT_IDLE
            if busy or self.ui.activity.preparing:
                app.invalidate()


def run_terminal(
    session: Session,
    commands: Commands,
    ui: TerminalUI,
    history: Path,
    first: Callable[[], None] | None = None,
) -> str | None:
    """The full terminal session on a real terminal, until the user quits; returns the
    session `/resume ID` switches to, if that ended it."""
    # planrun's own output goes straight to the terminal (in run_in_terminal); anything
    # else printed meanwhile lands above the prompt.
    ui.write_to(sys.stdout)
    with patch_stdout(raw=True):
        terminal = Terminal(session, commands, ui, history=FileHistory(str(history)))
        asyncio.run(terminal.run(first))
    ui.say(come_back(session))
    return terminal.resume_to


# TerminalUI is imported from here too (by the CLI).
__all__ = ["Terminal", "TerminalUI", "run_terminal"]
