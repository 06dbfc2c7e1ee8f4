"""Diffs as the user sees them: coloured (red, green, cyan hunk headers) on a terminal,
plain in a pipe or with NO_COLOR, every character visible, collapsed past a size."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sandbox_runner.safe_text import one_line
from sandbox_runner.session.approval_view import pieces
from sandbox_runner.session.diffs import COLLAPSE_LINES, DiffLine, FileDiff, collapse, more_note

if TYPE_CHECKING:
    from rich.text import Text

ANSI = {"file": "\x1b[1m", "hunk": "\x1b[36m", "del": "\x1b[31m", "add": "\x1b[32m"}
ANSI_DIM = "\x1b[2m"
ANSI_RESET = "\x1b[0m"
RICH = {"file": "bold", "hunk": "cyan", "del": "red", "add": "green", "note": "dim"}
EDITED_MARK = "  ⎿ "


def use_colour(stream: object) -> bool:
    """Colour on a terminal unless NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def visible(text: str) -> str:
    """One diff line with every character visible (a carriage return as ␍, ESC as ␛)."""
    return one_line("".join(piece.text for piece in pieces(text)))


def after_edit(diff: FileDiff, whole: bool = False) -> list[DiffLine]:
    """What is shown once an edit is made: its summary, then its diff (no file headers),
    the first COLLAPSE_LINES lines of it unless WHOLE, and a note of the rest."""
    if whole:
        body, hidden = [line for line in diff.lines if line.kind != "file"], 0
    else:
        body, hidden = collapse(diff.lines, COLLAPSE_LINES)
    lines = [DiffLine("summary", EDITED_MARK + diff.summary()), *body]
    if hidden:
        lines.append(DiffLine("note", more_note(hidden, diff.path)))
    return lines


def ansi_lines(lines: Iterable[DiffLine], colour: bool) -> list[str]:
    """LINES as text for a plain stream, coloured when COLOUR."""
    shown = []
    for line in lines:
        text = visible(line.text)
        if colour and line.kind in ANSI:
            text = f"{ANSI[line.kind]}{text}{ANSI_RESET}"
        elif colour and line.kind == "note":
            text = f"{ANSI_DIM}{text}{ANSI_RESET}"
        shown.append(text)
    return shown


def rich_text(lines: Iterable[DiffLine]) -> Text:
    """LINES for rich's console (which drops the colours itself where there are none)."""
    from rich.text import Text

    text = Text(no_wrap=False)
    for number, line in enumerate(lines):
        if number:
            text.append("\n")
        text.append(visible(line.text), style=RICH.get(line.kind, ""))
    return text
