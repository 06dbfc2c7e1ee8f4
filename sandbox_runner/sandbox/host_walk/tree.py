"""The repository's file tree as a before/after record: every path's type, permissions,
size, mtime and link target, as one stream of records kept compressed, and its digest.

Two records with the same digest show the same tree. Two that differ are parsed and
compared path by path, so a walk that met the same entries in another order (a directory
listed in another order) is no change, and a real change is named by its paths.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from sandbox_runner.limits import WORKSPACE_CHECK_LISTED_PATHS

__all__ = ["DIGEST_PREFIX", "FileTree", "PathChange", "TreeChanges", "records"]

DIGEST_PREFIX = "v2:"
"""Marks a digest over this record stream (an earlier planrun's digest has none)."""

Fields = tuple[bytes, bytes]
"""A path's "type+permissions size mtime" and its link target, as the walk wrote them."""


@dataclass(frozen=True)
class FileTree:
    """A walk of the workspace: its digest, and what a later walk is compared against."""

    digest: str
    """DIGEST_PREFIX and the sha256 of the record stream ("" when the walk did not finish)."""
    entries: int
    """How many files, directories and links the walk saw."""
    seconds: float
    """How long the walk took."""
    complete: bool = True
    """False when the walk stopped at its time limit, or short of the whole tree (see
    `stopped`): then nothing can be compared."""
    stream: tuple[bytes, ...] = field(default=(), repr=False)
    """The records, zlib-compressed: `path NUL type+permissions size mtime NUL link NUL`
    for each entry, the path relative to the workspace (the workspace itself is "")."""
    unreadable: tuple[str, ...] = ()
    """Directories the walk could not list: their contents are not compared."""
    stopped: str = ""
    """Why the walk stopped short of the whole tree, as find said it ("" when it did
    not, or ran out of time)."""

    @property
    def memory_bytes(self) -> int:
        """What the record holds in memory (the compressed stream)."""
        return sum(map(len, self.stream))

    def changes(self, later: FileTree) -> TreeChanges:
        """The paths that differ between this walk and a later one (none when only the
        order of the records differs)."""
        if self.digest == later.digest:
            return TreeChanges((), 0)
        before, after = dict(records(self.stream)), dict(records(later.stream))
        found: dict[str, PathChange] = {}
        for path in before.keys() | after.keys():
            how = _how(before.get(path), after.get(path))
            if how:
                name = path.decode("utf-8", "replace") or "."
                found[name] = PathChange(name, how)
        return TreeChanges.of(_collapse(found))


def records(stream: tuple[bytes, ...]) -> Iterator[tuple[bytes, Fields]]:
    """Each record of a compressed stream: (path, (type+permissions size mtime, link))."""
    if not stream:
        return
    tokens = zlib.decompress(b"".join(stream)).split(b"\0")
    for at in range(0, len(tokens) - 2, 3):
        yield tokens[at], (tokens[at + 1], tokens[at + 2])


@dataclass(frozen=True)
class PathChange:
    """A path that differs, and how: "added", "removed" or "modified"."""

    path: str
    how: str

    def __str__(self) -> str:
        return f"{self.path} ({self.how})"


@dataclass(frozen=True)
class TreeChanges:
    """The paths that differ, the first few of them listed and the rest counted."""

    listed: tuple[PathChange, ...]
    more: int

    @classmethod
    def of(cls, changes: list[PathChange]) -> TreeChanges:
        ordered = sorted(changes, key=lambda change: change.path)
        limit = WORKSPACE_CHECK_LISTED_PATHS
        return cls(tuple(ordered[:limit]), max(len(ordered) - limit, 0))

    def words(self) -> str:
        """e.g. "src/a.py (added), .git/index (modified), +3 more"."""
        text = ", ".join(map(str, self.listed))
        return text + (f", +{self.more} more" if self.more else "")


def _how(before: Fields | None, after: Fields | None) -> str:
    if before == after:
        return ""
    if before is None:
        return "added"
    if after is None:
        return "removed"
    return "modified"


def _collapse(found: dict[str, PathChange]) -> list[PathChange]:
    """Drop what follows from another change: the contents of an added or removed
    directory, and a directory's own new mtime when a change beneath it is listed."""
    gone_or_new = {path for path, change in found.items() if change.how != "modified"}
    below = {_parent(path) for path in found}
    ancestors_of_changes = set()
    for path in below:
        while path and path not in ancestors_of_changes:
            ancestors_of_changes.add(path)
            path = _parent(path)
    kept = []
    for path, change in found.items():
        if any(ancestor in gone_or_new for ancestor in _ancestors(path)):
            continue
        root_above = path == "." and len(found) > 1  # the workspace's own mtime
        if change.how == "modified" and (path in ancestors_of_changes or root_above):
            continue
        kept.append(change)
    return kept


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: n + 1]) for n in range(len(parts))]
