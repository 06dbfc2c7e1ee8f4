"""How a streaming answer looks: in the terminal, raw above the prompt while it arrives
(wrapped, its last lines kept), then printed as Markdown; in line mode, as it arrives."""

from __future__ import annotations

import io
import os

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.session.line import LineUI
from sandbox_runner.session.line_input import LineInput
from sandbox_runner.session.stream_view import StreamView
from sandbox_runner.session.terminal_output import TerminalUI


def event(kind: str, detail: str = "", tool: str | None = None) -> AgentEvent:
    return AgentEvent(kind, "work", 1, tool, detail, 0, 0, 0.0)


def test_the_preview_wraps_and_keeps_the_last_lines() -> None:
    view = StreamView()
    view.add("one two three four\nfive")
    assert view.preview(width=8, rows=10) == "one two \nthree fo\nur\nfive"
    assert view.preview(width=8, rows=3) == "…\nur\nfive"
    view.add(" 六七")  # wide characters take two columns
    assert view.preview(width=4, rows=3) == "…\n 六\n七"
    assert view.preview(width=5, rows=10).splitlines()[-2:] == ["five ", "六七"]


def test_the_preview_prints_escapes_as_themselves() -> None:
    view = StreamView()
    view.add("red \x1b[31mtext\r\n\x07bell")
    assert view.preview(80, 10) == "red ?[31mtext\n?bell"


def test_a_block_leaves_the_preview_once_printed_and_a_retry_voids_it() -> None:
    view = StreamView()
    view.add("First block.")
    first = view.end()
    view.add("Second")
    assert view.text == "First block.\n\nSecond"  # the first is not printed yet
    view.drop(first)
    assert view.text == "Second"
    view.restart()
    assert view.text == "" and view.preview(80, 10) == ""
    view.add("Again")
    assert view.text == "Again"


def test_the_terminal_prints_a_finished_block_as_markdown() -> None:
    out = io.StringIO()
    ui = TerminalUI()
    ui.write_to(out)
    for piece in ("Hello! This ", "is **bold**."):
        ui.event(event("text", piece))
    assert ui.stream.text == "Hello! This is **bold**." and out.getvalue() == ""
    assert ui.activity.current == "writing"
    ui.event(event("text_end", "Hello! This is **bold**."))
    assert ui.stream.text == ""
    assert out.getvalue().strip() == "Hello! This is bold."  # rendered: no asterisks


def line_ui(out: io.StringIO) -> LineUI:
    read, write = os.pipe()
    os.close(write)
    return LineUI(LineInput(os.fdopen(read)), out)


def test_line_mode_prints_text_as_it_arrives_and_ends_its_line() -> None:
    out = io.StringIO()
    ui = line_ui(out)
    ui.event(event("text", "Let me "))
    assert out.getvalue() == "Let me "  # already there, before the block ends
    ui.event(event("text", "look\x1b]0;title\x07.\r"))
    ui.event(event("text_end", "Let me look."))
    ui.event(event("tool_call", "src/app.py", tool="Read"))
    ui.event(event("tool_result", "error: File does not exist.", tool="Read"))
    ui.event(event("text", "Done.\n"))
    ui.event(event("text_end", "Done.\n"))
    ui.show("stopped: interrupted")
    assert out.getvalue() == (
        "Let me look?]0;title?.\n· Read src/app.py\n  ✗ File does not exist.\nDone.\n"
        "stopped: interrupted\n"
    )


def test_line_mode_says_when_a_streamed_answer_starts_again() -> None:
    out = io.StringIO()
    ui = line_ui(out)
    ui.event(event("text", "Half"))
    ui.event(event("text_restart"))
    ui.event(event("text", "Whole."))
    ui.event(event("text_end", "Whole."))
    assert out.getvalue() == "Half\n(the answer starts again: the model call is retried)\nWhole.\n"
