"""A directory tree walked top-down with a stack of its own, links never followed.

os.walk recurses once per level on Python 3.11, so a repository 1,000 directories deep
ended in a RecursionError wherever planrun walked it; every host-side walk goes through
here instead. Like os.walk top-down, each directory comes with its entries, and the
caller removes from `below` the subdirectories it does not want entered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from sandbox_runner.errors import PlanrunError

__all__ = ["Directory", "TreeTooLargeError", "remove_tree", "walk"]


class TreeTooLargeError(PlanrunError):
    """A walk met more entries than its bound."""

    def __init__(self, root: str, limit: int) -> None:
        super().__init__(f"more than {limit} files and directories under {root}")
        self.root, self.limit = root, limit


@dataclass
class Directory:
    """One directory of a walk, and its entries sorted by name."""

    path: str
    relative: str
    """Its path from the walk's root, "" for the root itself."""
    entries: list[os.DirEntry[str]]
    below: list[os.DirEntry[str]] = field(default_factory=list)
    """The subdirectories entered next, in name order: every entry that is a directory
    itself (a link to one is not); the caller may remove some."""

    def relative_of(self, entry: os.DirEntry[str]) -> str:
        """ENTRY's path from the walk's root."""
        return os.path.join(self.relative, entry.name) if self.relative else entry.name


def walk(
    root: str | os.PathLike[str],
    *,
    skip_unlistable: bool = False,
    max_entries: int | None = None,
) -> Iterator[Directory]:
    """Every directory of the tree at ROOT, each before the ones beneath it, in name order
    (the first subdirectory's subtree comes before the second's, as os.walk goes).

    Args:
        skip_unlistable: a directory that cannot be listed comes with no entries, rather
            than raising its OSError (os.walk's default).
        max_entries: raise TreeTooLargeError once the walk has listed more entries.

    Raises:
        OSError: a directory cannot be listed (unless skip_unlistable).
        TreeTooLargeError: more than max_entries entries.
    """
    listed = 0
    stack = [(os.fspath(root), "")]
    while stack:
        path, relative = stack.pop()
        entries = _entries(path, skip_unlistable)
        listed += len(entries)
        if max_entries is not None and listed > max_entries:
            raise TreeTooLargeError(os.fspath(root), max_entries)
        directory = Directory(path, relative, entries, [e for e in entries if _is_dir(e)])
        yield directory
        stack.extend(
            (entry.path, directory.relative_of(entry)) for entry in reversed(directory.below)
        )


def _entries(path: str, skip_unlistable: bool) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as scan:
            return sorted(scan, key=lambda entry: entry.name)
    except OSError:
        if skip_unlistable:
            return []
        raise


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """A directory, not a link to one (an entry gone since the listing is neither)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def remove_tree(root: str | os.PathLike[str]) -> None:
    """rm -r ROOT without recursion (shutil.rmtree recurses once per level on Python
    3.11); links are removed, never followed.

    Raises:
        OSError: an entry cannot be removed.
    """
    directories = []
    for directory in walk(root):
        directories.append(directory.path)
        entered = {entry.name for entry in directory.below}
        for entry in directory.entries:
            if entry.name not in entered:
                os.unlink(entry.path)
    for path in reversed(directories):
        os.rmdir(path)
