"""What changed between two revisions of a plan: a unified diff and its line counts."""

from __future__ import annotations

import difflib


def unified_lines(old: str, new: str, from_label: str, to_label: str) -> list[str]:
    """The unified diff from OLD to NEW (three lines of context), one line per item,
    without line ends; empty when the texts are the same."""
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=from_label,
            tofile=to_label,
        )
    ]


def line_changes(old: str, new: str) -> tuple[int, int]:
    """How many lines NEW adds to OLD, and how many it removes."""
    added = removed = 0
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), n=0, lineterm="")
    # The two header lines go first: a removed line "-- x" reads "--- x" too.
    for line in list(diff)[2:]:
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return added, removed
