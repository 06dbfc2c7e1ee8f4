"""/diff and /undo: what the agent changed in the repository this session, and taking its
last turns back (commands.py parses them; this is what they do)."""

from __future__ import annotations

from sandbox_runner.errors import ConfigError
from sandbox_runner.session.checkpoints import Checkpoints
from sandbox_runner.session.diffs import COLLAPSE_LINES, DiffLine, collapse, more_note
from sandbox_runner.session.undo import undo

WHOLE_DIFF_LINES = 200
"""/diff shows every file whole up to this many lines in all; past it, each collapsed."""


def session_diff(checkpoints: Checkpoints, args: list[str]) -> tuple[list[str], list[DiffLine]]:
    """/diff [PATH]: a line of totals, then the diff of each file the agent changed since
    the session started (PATH: that file's, whole)."""
    if len(args) > 1:
        raise ConfigError("/diff takes at most one path")
    if checkpoints.off is not None:
        raise ConfigError(f"/diff cannot work in this session: {checkpoints.off}")
    only = args[0].removeprefix("./") if args else None
    diffs = checkpoints.session_diffs(only)
    if not diffs:
        what = f"{only} is" if only else "the files the agent changed are"
        return [f"no changes: {what} as when the session started"], []
    added, removed = sum(d.added for d in diffs), sum(d.removed for d in diffs)
    files = f"{len(diffs)} file{'s' if len(diffs) != 1 else ''}"
    lines_added = f"{added} line{'s' if added != 1 else ''} added"
    head = f"{files} changed by the agent this session: {lines_added}, {removed} removed"
    whole = only is not None or sum(len(d.lines) for d in diffs) <= WHOLE_DIFF_LINES
    lines: list[DiffLine] = []
    for diff in diffs:
        if whole:
            lines += diff.lines
            continue
        body, hidden = collapse(diff.lines, COLLAPSE_LINES)
        lines += [*(line for line in diff.lines if line.kind == "file"), *body]
        if hidden:
            lines.append(DiffLine("note", more_note(hidden, diff.path)))
    return [head], lines


def session_undo(checkpoints: Checkpoints, args: list[str]) -> list[str]:
    """/undo [N]: the agent's last N turns that changed files taken back."""
    if len(args) > 1 or (args and not args[0].isdigit()):
        raise ConfigError("/undo takes a number of turns: /undo [N]")
    return undo(checkpoints, int(args[0]) if args else 1)


def undo_note(lines: list[str]) -> str:
    """What the agent is told after an undo (its picture of the files is out of date)."""
    done = " ".join(line.strip() for line in lines)
    return (
        f"The user undid your changes ({done}). Those files are back as they were before "
        "your turns; read them again before you edit them."
    )
