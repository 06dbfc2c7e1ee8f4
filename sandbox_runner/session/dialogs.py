"""The terminal session's dialogs: an approval, and the plan review. Each shows the user
every character of what it asks about, the way the agent has it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.styles import Style

from sandbox_runner.safe_text import one_line, terminal_text
from sandbox_runner.session.approval_view import (
    Line,
    approval_lines,
    as_text,
    fit,
    flat,
    size_note,
    source_lines,
)
from sandbox_runner.session.session import PlanReview
from sandbox_runner.tools.permissions import Approval, Ask, PermissionMode
from sandbox_runner.tools.policy import ToolKind

if TYPE_CHECKING:
    from rich.console import RenderableType

KEEP_PLANNING = "No, keep planning (tell the agent what to change)"
DIALOG_STYLE = Style.from_dict(
    {
        # choice()'s own style, which a style given to it replaces:
        "frame.border": "#884444",
        "selected-option": "bold",
        "marker": "reverse",  # a stand-in (⏎, ␠×60, ␛), not a character of the command
        "cut": "fg:ansiyellow bold",
    }
)
RESERVED_ROWS = 10
"""Rows an approval keeps for its question, its answers and the note of what is cut."""


def approval_dialog(ask: Ask) -> Approval:
    """The approval as a small dialog (run with the terminal released to it): what it is
    about as much as the screen holds, a note of the rest, which v pages whole."""
    from prompt_toolkit.application.current import get_app_session
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.shortcuts import choice, prompt

    lines = approval_lines(ask)
    keys = KeyBindings()

    @keys.add("v")
    def _view(event: KeyPressEvent) -> None:
        event.app.exit(result="view")

    while True:
        size = get_app_session().output.get_size()
        try:
            answer = choice(
                message=approval_message(ask, lines, size.columns, size.rows),
                options=_approval_options(ask),
                default="yes",
                key_bindings=keys,
                style=DIALOG_STYLE,
            )
        except (KeyboardInterrupt, EOFError):
            return Approval(False, feedback="")
        if answer != "view":
            break
        page(as_text(lines))
    if answer == "no":
        try:
            feedback = prompt("What should the agent do instead? (enter to skip) ")
        except (KeyboardInterrupt, EOFError):
            feedback = ""
        return Approval(False, feedback=feedback.strip())
    return Approval(True, always=answer == "always")


def approval_message(ask: Ask, lines: list[Line], columns: int, rows: int) -> StyleAndTextTuples:
    """The question, then what it is about in at most ROWS - RESERVED_ROWS rows, and what
    does not fit said exactly."""
    command = str(ask.request.args["command"]) if ask.kind is ToolKind.COMMAND else None
    if command is not None:
        title = f"Allow the agent to run this command? ({size_note(command)})"
    else:
        title = f"Allow the agent to {flat(ask.question)}?"
    shown, cut = fit(lines, max(10, columns - 2), max(3, rows - RESERVED_ROWS))
    fragments: StyleAndTextTuples = [("", title), ("", "\n")]
    for line in shown:
        fragments.append(("", "\n"))
        fragments += [("class:marker" if piece.marker else "", piece.text) for piece in line]
    if cut is not None:
        fragments += [("", "\n"), ("class:cut", cut.note(command))]
    return fragments


def _approval_options(ask: Ask) -> list[tuple[str, str]]:
    if ask.once_only:
        always: str | None = None  # a protected file: each edit is its own question
    elif ask.kind is ToolKind.EDIT:
        always = "Yes, and don't ask again for edits this session"
    elif ask.prefix:
        what = "calls" if ask.kind is ToolKind.MCP else "commands"
        always = f"Yes, and don't ask again for `{one_line(ask.prefix)}` {what} this session"
    else:
        always = None  # unreadable at a glance, a wrapper, variables: never for good
    return [
        ("yes", "Yes"),
        *([("always", always)] if always else []),
        ("no", "No, and tell the agent what to do differently"),
    ]


def page(text: str) -> None:
    """TEXT in $PAGER (less when unset); printed when no pager starts."""
    pager = os.environ.get("PAGER") or "less"
    try:
        subprocess.run(shlex.split(pager), input=text, text=True, check=False)
    except OSError:
        print(text, file=sys.__stdout__)


def review_dialog(plan_file: Path, text: str, restage: Callable[[], None]) -> PlanReview:
    """The plan review: the plan as the agent will receive it, its path, and four answers;
    the cursor starts on the safe yes (edits still need approval)."""
    from prompt_toolkit.shortcuts import choice, prompt
    from rich.console import Console
    from rich.rule import Rule

    console = Console(file=sys.__stdout__, highlight=False)
    while True:
        console.print(Rule("The plan, as the agent receives it"))
        console.print(plan_view(text))
        console.print(Rule(terminal_text(str(plan_file)), style="dim"))
        try:
            answer = choice(
                message="The agent has written a plan and is ready to implement it. Proceed?",
                options=[
                    ("auto", "Yes, and auto-accept edits"),
                    ("manual", "Yes, manually approve edits"),
                    ("edit", "Edit the plan in $EDITOR first"),
                    ("keep", KEEP_PLANNING),
                ],
                default="manual",
            )
        except (KeyboardInterrupt, EOFError):
            return PlanReview(False, feedback="")
        if answer == "auto":
            return PlanReview(True, PermissionMode.ACCEPT_EDITS)
        if answer == "manual":
            return PlanReview(True, PermissionMode.DEFAULT)
        if answer == "edit":
            edit_file(plan_file)
            restage()
            text = plan_file.read_text(errors="replace")
            continue
        try:
            feedback = prompt("What should the agent change? ")
        except (KeyboardInterrupt, EOFError):
            feedback = ""
        return PlanReview(False, feedback=feedback.strip())


def plan_view(text: str) -> RenderableType:
    """The plan's Markdown source, highlighted, not rendered: a rendering drops HTML
    comments, <details> blocks, link targets and reference definitions, which the agent
    still receives. Control characters and long runs of blanks show as markers."""
    from rich.syntax import Syntax

    source = "\n".join(source_lines(text.rstrip("\n")))
    return Syntax(source, "markdown", theme="ansi_dark", word_wrap=True, background_color="default")


def edit_file(path: Path) -> None:
    """Open PATH in $VISUAL or $EDITOR (vi when neither is set) and wait for it."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        subprocess.run([*shlex.split(editor), str(path)], check=False)
    except OSError as error:
        print(f"could not start {editor}: {error}", file=sys.__stderr__)
