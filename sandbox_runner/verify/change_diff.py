"""The change as a diff, for the judge: what changed since the comparison's start, read
through the private git directory (no repository config runs), cut to a size a prompt
holds; untracked files are listed for the judge to read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.verify.changes import SUBMODULES, Change
from sandbox_runner.verify.git_copy import private_git

__all__ = ["MAX_DIFF_CHARS", "ChangeDiff", "change_diff"]

MAX_DIFF_CHARS = 60_000
"""About 15k tokens: the judge reads the rest with git in its sandbox."""
PATHS_PER_CALL = 200
"""Paths given to one `git diff` (a command line has a length limit)."""
DIFF = ("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", SUBMODULES)


@dataclass(frozen=True)
class ChangeDiff:
    """The change's diff (perhaps cut), and the new files it does not show."""

    start: str
    """The commit the diff starts from (the merge base with --base, else HEAD)."""
    text: str
    cut: bool
    """Whether the diff was longer than MAX_DIFF_CHARS."""
    untracked: tuple[str, ...]


def change_diff(workspace: Path, change: Change, paths: list[str]) -> ChangeDiff:
    """The diff of PATHS (the changed files verify holds to the plan) from where CHANGE
    starts to the working tree.

    Raises:
        GitError: git failed.
    """
    start = change.base_commit or change.head
    parts: list[str] = []
    size = 0
    with private_git(workspace) as git:
        untracked = set(git.paths("ls-files", "-z", "--others", "--exclude-standard"))
        tracked = [path for path in paths if path not in untracked]
        for first in range(0, len(tracked), PATHS_PER_CALL):
            if size > MAX_DIFF_CHARS:
                break
            chunk = tracked[first : first + PATHS_PER_CALL]
            specs = [f":(literal){path}" for path in chunk]
            text = git.run(*DIFF, start, "--", *specs)[1]
            parts.append(text)
            size += len(text)
    text = "".join(parts)
    cut = len(text) > MAX_DIFF_CHARS
    return ChangeDiff(
        start=start,
        text=text[:MAX_DIFF_CHARS],
        cut=cut,
        untracked=tuple(path for path in paths if path in untracked),
    )
