"""What an approval shows: the whole command or edit with every character visible (line
breaks, long runs of blanks, control characters), and, where a screen cannot hold it all,
exactly how much is left out."""

from __future__ import annotations

import difflib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from sandbox_runner.tools.permissions import LONG_BLANKS, Ask
from sandbox_runner.tools.policy import ToolKind

KEPT_INDENT = 40
"""Spaces at the start of a line are indentation, shown as they are up to this many."""
LINE_BREAK = "⏎"


class Piece(NamedTuple):
    """A run of a line as shown: TEXT stands for SIZE characters of the original; a marker
    (`⏎`, `␠×60`, `␛`) stands for characters that would not show as themselves."""

    text: str
    size: int
    marker: bool = False


Line = list[Piece]


@dataclass(frozen=True)
class Cut:
    """What a bounded view leaves out: characters of the original, and the lines of the
    view they are on (a line shown in part counts)."""

    chars: int
    lines: int

    def note(self, original: str | None = None) -> str:
        """What is not shown, in lines of ORIGINAL when given, else in lines of the view."""
        if original is not None:
            lines = original[len(original) - self.chars :].count("\n") + 1
            what = f"the last {self.chars:,} characters ({_lines(lines)})"
        else:
            what = f"{_lines(self.lines)}, {self.chars:,} characters"
        return f"… not shown: {what}; press v to see all of it"


def pieces(line: str) -> Line:
    """One line (no line break in it) as pieces, every character visible."""
    shown: Line = []
    for kind, group in itertools.groupby(line, _kind):
        run = "".join(group)
        if kind == "text":
            shown.append(Piece(run, len(run)))
        elif kind == " ":
            limit = KEPT_INDENT if not shown else LONG_BLANKS
            shown.append(Piece(run, len(run)) if len(run) <= limit else _counted("␠", len(run)))
        elif kind == "\t":
            tabs = Piece("⇥" * len(run), len(run), True)
            shown.append(tabs if len(run) <= 3 else _counted("⇥", len(run)))
        else:
            shown.extend(Piece(_control(char), 1, True) for char in run)
    return shown


def text_lines(text: str) -> list[Line]:
    """TEXT as lines of pieces, each line break shown as `⏎` at the end of its line; more
    than two empty lines in a row are one line of their count (`⏎×60`)."""
    lines: list[Line] = []
    for empty, group in itertools.groupby(text.split("\n")[:-1], lambda line: not line):
        run = list(group)
        if empty and len(run) > 2:
            lines.append([_counted(LINE_BREAK, len(run))])
        else:
            lines += [[*pieces(line), Piece(LINE_BREAK, 1, True)] for line in run]
    return [*lines, pieces(text.rsplit("\n", 1)[-1])]


def source_lines(text: str) -> list[str]:
    """TEXT (a plan) line by line as it is, but with every character visible and more than
    two blank lines in a row as one line of their count."""
    shown: list[str] = []
    for blank, group in itertools.groupby(text.split("\n"), lambda line: not line.strip(" ")):
        run = list(group)
        if blank and len(run) > 2:
            shown.append(f"{LINE_BREAK}×{len(run)} (blank lines)")
        else:
            shown += ["".join(piece.text for piece in pieces(line)) for line in run]
    return shown


def as_text(lines: list[Line]) -> str:
    """LINES as plain text, markers and all (for a pager)."""
    return "".join("".join(piece.text for piece in line) + "\n" for line in lines)


def flat(text: str) -> str:
    """TEXT on one line, every character visible (line mode, titles)."""
    return "".join(piece.text for line in text_lines(text) for piece in line)


def size_note(text: str) -> str:
    """`8 characters`, `6,087 characters on 62 lines`."""
    lines = text.count("\n") + 1
    return f"{len(text):,} characters" + (f" on {lines:,} lines" if lines > 1 else "")


def approval_lines(ask: Ask) -> list[Line]:
    """Everything an approval is about: the command, the edit's diff, the file written."""
    args = ask.request.args
    if ask.kind is ToolKind.COMMAND:
        return text_lines(str(args["command"]))
    if ask.kind is ToolKind.MCP:
        return text_lines(json.dumps(args, indent=2, ensure_ascii=False))
    if "old_string" in args and "new_string" in args:
        return _diff(str(args["old_string"]), str(args["new_string"]))
    if "content" in args:
        return [[Piece("+", 0), *pieces(line)] for line in str(args["content"]).split("\n")]
    return []


def fit(lines: list[Line], width: int, rows: int) -> tuple[list[Line], Cut | None]:
    """The lines that fit ROWS rows of WIDTH cells (a long line wraps), and what is cut."""
    from prompt_toolkit.utils import get_cwidth

    shown: list[Line] = []
    free = rows
    for number, line in enumerate(lines):
        needed = max(1, -(-sum(get_cwidth(piece.text) for piece in line) // width))
        if needed <= free:
            shown.append(line)
            free -= needed
            continue
        head = _head(line, free * width, get_cwidth)
        if head:
            shown.append(head)
        rest = lines[number:]
        chars = sum(piece.size for later in rest for piece in later)
        return shown, Cut(chars - sum(piece.size for piece in head), len(rest))
    return shown, None


def _head(line: Line, room: int, cells: Callable[[str], int]) -> Line:
    """The start of LINE that fits ROOM cells; a marker is never split."""
    head: Line = []
    for piece in line:
        width = cells(piece.text)
        if width > room:
            part = _prefix(piece.text, room, cells) if not piece.marker else ""
            if part:
                head.append(Piece(part, len(part)))
            break
        head.append(piece)
        room -= width
    return head


def _prefix(text: str, room: int, cells: Callable[[str], int]) -> str:
    used = 0
    for index, char in enumerate(text):
        used += cells(char)
        if used > room:
            return text[:index]
    return text


def _diff(old: str, new: str) -> list[Line]:
    """The edit as one hunk over the replaced text alone: no line numbers, since where the
    text sits in the file is not known here."""
    before, after = old.split("\n"), new.split("\n")
    diff = difflib.unified_diff(before, after, n=max(len(before), len(after)), lineterm="")
    return [[Piece(line[0], 0), *pieces(line[1:])] for line in list(diff)[3:]]


def _counted(sign: str, count: int) -> Piece:
    return Piece(f"{sign}×{count}", count, True)


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count:,} lines"


def _kind(char: str) -> str:
    if char in " \t":
        return char
    return "text" if char.isprintable() else "control"


def _control(char: str) -> str:
    """A stand-in that shows which character it is: `␛` for ESC, `⟨U+202E⟩` for others."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "␡"
    return f"⟨U+{code:04X}⟩"
