"""The repository's file tree as a before/after record: one digest over every path's type,
mode, size, mtime and link target, a digest per directory, and each directory's entries
kept compressed, so that two records can name the paths that differ.

No file contents are read: a walk is one scandir per directory and one lstat per entry,
the fewest system calls that see every write, rename, chmod and link. Each directory's
entries become one bytes blob, hashed into the tree's digest and into the directory's own;
kept compressed, a record takes 20 to 26 bytes per entry (benchmarks/workspace_check.py).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter

from sandbox_runner.limits import WORKSPACE_CHECK_LISTED_PATHS

__all__ = ["FileTree", "PathChange", "TreeChanges", "take_tree", "tree_fingerprint"]

_BY_NAME = attrgetter("name")
KeepEntries = Callable[[str, bytes], bool]
"""Whether a directory's entries are kept, given its relative path and digest."""


@dataclass(frozen=True)
class FileTree:
    """A walk of the workspace: its digest, and what a later walk is compared against."""

    digest: str
    """The sha256 of every entry, in walk order ("" when the walk did not finish)."""
    entries: int
    """How many files, directories and links the walk saw."""
    seconds: float
    """How long the walk took."""
    complete: bool = True
    """False when the walk stopped at its time limit: then nothing can be compared."""
    directories: dict[str, bytes] = field(default_factory=dict, repr=False)
    """Each directory's digest, by path relative to the workspace ("" is the root)."""
    kept: dict[str, bytes] = field(default_factory=dict, repr=False)
    """The compressed entries of the directories kept (every one, or those that differ)."""
    unreadable: tuple[str, ...] = ()
    """Directories the walk could not list: their contents are not compared."""

    @property
    def memory_bytes(self) -> int:
        """About what the record holds in memory (blobs and digests, not dict overhead)."""
        blobs = sum(len(blob) for blob in self.kept.values())
        names = sum(len(name) + 16 for name in self.directories)
        return blobs + names

    def changes(self, later: FileTree) -> TreeChanges:
        """The paths that differ between this walk (which kept every directory) and a later
        one (which kept at least those whose digest differs from this one's)."""
        changed = [
            name
            for name in self.directories.keys() | later.directories.keys()
            if self.directories.get(name) != later.directories.get(name)
        ]
        found: dict[str, PathChange] = {}
        for name in changed:
            before = _parse(name, self.kept.get(name, b""))
            after = _parse(name, later.kept.get(name, b""))
            for path in before.keys() | after.keys():
                how = _how(before.get(path), after.get(path))
                if how:
                    found[path] = PathChange(path, how)
        return TreeChanges.of(_collapse(found))


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


def tree_fingerprint(
    workspace: os.PathLike[str] | str,
    *,
    exclude: os.PathLike[str] | str | None = None,
    time_limit: float | None = None,
) -> str | None:
    """A hash of every path, type, mode, size, mtime and link target under the workspace.

    .git is included: a write there is a change too. A directory it cannot read is part of
    the hash, not an error. None when it takes longer than time_limit seconds.
    """
    tree = take_tree(workspace, exclude=exclude, time_limit=time_limit, keep=None)
    return tree.digest if tree.complete else None


def take_tree(
    workspace: os.PathLike[str] | str,
    *,
    exclude: os.PathLike[str] | str | None = None,
    time_limit: float | None = None,
    keep: KeepEntries | None = lambda name, digest: True,
) -> FileTree:
    """Walk the workspace (depth first, entries by name, an explicit stack so any depth
    is fine), keeping the entries of the directories `keep` accepts (keep=None: no
    per-directory record at all, the digest only)."""
    started = time.monotonic()
    deadline = None if time_limit is None else started + time_limit
    hasher = hashlib.sha256()
    root, excluded = os.fspath(workspace), None if exclude is None else os.fspath(exclude)
    directories: dict[str, bytes] = {}
    kept: dict[str, bytes] = {}
    unreadable: list[str] = []
    count, stack = 0, [""]
    while stack:
        if deadline is not None and time.monotonic() >= deadline:
            return FileTree("", count, time.monotonic() - started, complete=False)
        relative = stack.pop()
        blob, subdirectories, seen = _directory(root, relative, excluded)
        if seen < 0:
            unreadable.append(relative or ".")
        count += max(seen, 0)
        hasher.update(blob)
        if keep is not None:
            digest = hashlib.blake2b(blob, digest_size=16).digest()
            directories[relative] = digest
            if keep(relative, digest):
                kept[relative] = zlib.compress(blob, 1)
        stack.extend(reversed(subdirectories))
    seconds = time.monotonic() - started
    return FileTree(hasher.hexdigest(), count, seconds, True, directories, kept, tuple(unreadable))


def _directory(root: str, relative: str, excluded: str | None) -> tuple[bytes, list[str], int]:
    """One directory's entries as lines `path NUL mode NUL size NUL mtime NUL link`, its
    subdirectories, and how many entries it has (-1 when it cannot be listed)."""
    path = f"{root}/{relative}" if relative else root
    try:
        with os.scandir(path) as scan:
            entries = sorted(scan, key=_BY_NAME)
    except OSError as error:
        return os.fsencode(f"{relative or '.'}\0unreadable {error.errno}\n"), [], -1
    prefix = f"{relative}/" if relative else ""
    lines, subdirectories = [], []
    is_link, is_directory = stat.S_ISLNK, stat.S_ISDIR
    for entry in entries:
        if excluded is not None and entry.path == excluded:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        mode, name = info.st_mode, prefix + entry.name
        link = ""
        if is_link(mode):
            link = _link_target(entry.path)
        elif is_directory(mode):
            subdirectories.append(name)
        lines.append(f"{name}\0{mode}\0{info.st_size}\0{info.st_mtime_ns}\0{link}\n")
    return os.fsencode("".join(lines)), subdirectories, len(lines)


def _link_target(path: str) -> str:
    # /proc's links (planning "/") cannot all be read; such a link is hashed as unreadable.
    try:
        return os.readlink(path)
    except OSError as error:
        return f"<unreadable: {error.errno}>"


Fields = tuple[str, ...]


def _parse(directory: str, compressed: bytes) -> dict[str, Fields]:
    """A kept directory's entries: path -> (mode, size, mtime, link)."""
    if not compressed:
        return {}
    text = zlib.decompress(compressed).decode("utf-8", "replace")
    tokens = text.split("\0")
    if len(tokens) == 2:  # "path NUL unreadable errno": its entries are not known
        return {}
    prefix = f"\n{directory}/" if directory else "\n"
    entries: dict[str, Fields] = {}
    path = tokens[0]
    for at in range(1, len(tokens) - 3, 4):
        mode, size, mtime, rest = tokens[at : at + 4]
        # rest is the link target, a line end, and the next entry's path; a target
        # holding a line end is split at the one the next path follows.
        cut = rest.find(prefix) if stat.S_ISLNK(int(mode or 0)) else rest.find("\n")
        cut = len(rest) - 1 if cut < 0 else cut
        entries[path] = (mode, size, mtime, rest[:cut])
        path = rest[cut + 1 :]
    return entries


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
        if change.how == "modified" and path in ancestors_of_changes:
            continue
        kept.append(change)
    return kept


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: n + 1]) for n in range(len(parts))]
