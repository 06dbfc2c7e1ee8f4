"""The git guard's seed made from the workspace check's own walk (sandbox/host_walk/find.py):
each directory as the guard's look would record it (sandbox/toolserver/git_tree.py).

A seed row may only ever say what the guard would have found itself, so a directory is
left out (the sandbox lists it) whenever the walk cannot vouch for its listing: its ctime
is racy (a change in the same tick would keep the stamp), it is on another device, too
deep, could not be listed, holds one of git's own files that is no regular file, or
holds the directory the walk left out. The stamp comes from find's lstat of the
directory, which it makes before it reads the directory.
"""

from __future__ import annotations

import os
import stat
import sys
from collections import Counter, defaultdict

from sandbox_runner.sandbox.host_walk.find import SeedParts
from sandbox_runner.sandbox.toolserver.git_scan import (
    GIT_COARSE_RACY_NS,
    GIT_RACY_NS,
    GIT_SCAN_MAX_DEPTH,
    GIT_SCAN_MAX_ENTRIES,
    GIT_WORKTREE_FILES,
)
from sandbox_runner.sandbox.toolserver.git_seed import Row, encode_seed

__all__ = ["seed_from_walk"]

_ENCODING = sys.getfilesystemencoding()

_GIT_DIR_NAMES = frozenset({"HEAD", "refs", "commondir"})


class _Names:
    """What a directory holds of git's own names."""

    __slots__ = ("dot_git", "git_dir", "gitmodules", "names", "special")

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.dot_git = self.gitmodules = self.special = False

    @property
    def is_git_dir(self) -> bool:
        return "HEAD" in self.names and bool(self.names & {"refs", "commondir"})


def seed_from_walk(parts: SeedParts, root: str) -> bytes | None:
    """The seed of the walk's PARTS (the walk of ROOT), or None when the walk cannot vouch
    for it at all (a complaint it cannot explain, too many entries)."""
    if parts.errors > len(parts.unreadable):
        return None  # something else could not be read: which listing is incomplete?
    device = os.lstat(root).st_dev
    counts = _counts(parts.files["counts"])
    if sum(counts.values()) > GIT_SCAN_MAX_ENTRIES:
        return None
    subdirectories: defaultdict[str, list[str]] = defaultdict(list)
    links: defaultdict[str, list[str]] = defaultdict(list)
    names: defaultdict[str, _Names] = defaultdict(_Names)
    for (link,) in _fields(parts.files["links"], 1):
        parent, name = _split(link)
        if name != ".git" and not _in_git(parent):  # the guard's look takes `.git` alone
            links[parent].append(name)
    for entry, kind in _fields(parts.files["names"], 2):
        parent, name = _split(entry)
        _note_name(names[parent], name, kind)
    # The guard does not walk into a `.git`: the git tier reads what git reads there.
    directories = [row for row in _fields(parts.files["dirs"], 2) if not _in_git(row[0])]
    for path, _ in directories:
        if path:
            parent, name = _split(path)
            subdirectories[parent].append(name)
    refused = {"" if path == "." else path for path in parts.unreadable}
    if parts.excluded is not None:
        refused.add(_split(parts.excluded)[0])
    rows: list[Row] = []
    for path, numbers in directories:
        found = names.get(path)
        if path in refused or (found is not None and found.special):
            continue
        stamp = _stamp(numbers, device, parts.started_ns)
        if stamp is None:
            continue
        found = found or _Names()
        rows.append([path, stamp, counts.get(path, 0), subdirectories.get(path, []),
                     links.get(path, []), found.dot_git, found.gitmodules,
                     found.is_git_dir])  # fmt: skip
    return encode_seed(rows)


def _counts(data: bytes) -> Counter[str]:
    """Entries per directory, from find's `%h` of each entry (the workspace is "."; its
    own `%h` is "." too, so one is taken off)."""
    counted = Counter(data.split(b"\0"))
    counted.pop(b"", None)
    counts: Counter[str] = Counter()
    for parent, number in counted.items():
        name = os.fsdecode(parent)
        counts["" if name == "." else name.removeprefix("./")] = number
    counts[""] -= 1
    return counts


def _fields(data: bytes, width: int) -> list[list[str]]:
    """find's NUL-ended fields, WIDTH to a record."""
    tokens = data.decode(_ENCODING, "surrogateescape").split("\0")[:-1]  # as os.fsdecode
    return [tokens[at : at + width] for at in range(0, len(tokens) - width + 1, width)]


def _in_git(path: str) -> bool:
    """Whether PATH is a `.git` or inside one."""
    return ".git" in path.split("/")


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent, name


def _note_name(found: _Names, name: str, kind: str) -> None:
    if name in _GIT_DIR_NAMES:
        found.names.add(name)
    if name == ".git":
        found.dot_git = True
    elif name in GIT_WORKTREE_FILES:
        if kind == "f" and name == ".gitmodules":
            found.gitmodules = True
        elif kind not in ("f", "d", "l"):
            found.special = True  # the guard would look closer: let it


def _stamp(numbers: str, device: int, started_ns: int) -> list[int] | None:
    """[ino, mode, size, mtime_ns, ctime_ns] from find's `%D %i %m %s %T@ %C@ %d`; None
    when the directory is on another device, too deep, or its ctime racy."""
    try:
        dev, ino, permissions, size, mtime, ctime, depth = numbers.split(" ")
        values = [int(dev), int(ino), int(permissions, 8), int(size), int(depth)]
        mtime_ns, ctime_ns = _nanoseconds(mtime), _nanoseconds(ctime)
    except ValueError:
        return None
    if values[0] != device or values[4] > GIT_SCAN_MAX_DEPTH or min(values) < 0:
        return None
    racy = GIT_RACY_NS if ctime_ns % 1_000_000_000 else GIT_COARSE_RACY_NS
    if ctime_ns > started_ns - racy or mtime_ns < 0:
        return None
    return [values[1], stat.S_IFDIR | values[2], values[3], mtime_ns, ctime_ns]


def _nanoseconds(text: str) -> int:
    """find's `%T@` (seconds, a point, ten digits: nanoseconds and a 0) in nanoseconds."""
    seconds, _, fraction = text.partition(".")
    digits = seconds + fraction[:9]
    if len(fraction) != 10 or not digits.isdigit():
        raise ValueError(text)
    return int(digits)
