"""What a git working tree tracks, read from its index file without running git (a
repository's config can name programs for git to run, and git never runs on the host)."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.errors import ConfigError
from sandbox_runner.git_config import parse_git_config

__all__ = ["Checkout", "Tracked", "checkout_of"]

_SHA256_BYTES, _SHA1_BYTES = 32, 20
_STAT_BYTES = 40
"""ctime, mtime, dev, ino, mode, uid, gid and size: ten 32-bit fields before the object id."""


@dataclass(frozen=True)
class Tracked:
    """The paths a working tree's index lists, relative to it, `/`-separated (a submodule's
    path is a tracked path too), and every directory above one of them."""

    paths: frozenset[str] = frozenset()
    directories: frozenset[str] = frozenset()

    @classmethod
    def of(cls, paths: set[str]) -> Tracked:
        directories: set[str] = set()
        for path in paths:
            parent = path.rpartition("/")[0]
            while parent and parent not in directories:
                directories.add(parent)
                parent = parent.rpartition("/")[0]
        return cls(frozenset(paths), frozenset(directories))

    def holds(self, relative: str) -> bool:
        """Whether relative is tracked, or a directory with tracked paths beneath it."""
        return relative in self.paths or relative in self.directories


@dataclass(frozen=True)
class Checkout:
    """A git working tree: its git directory, the one it shares objects and info/ with
    (the same but for a linked worktree), and what it tracks."""

    git_dir: Path
    common_dir: Path
    tracked: Tracked
    ignore_case: bool


def checkout_of(worktree: Path) -> Checkout | None:
    """The git working tree at worktree (its `.git` a directory, or a file that names one);
    None when worktree is not the top of one, or its git directory is not there.

    Raises:
        ConfigError: its index cannot be read.
    """
    git_dir = _git_dir(worktree)
    if git_dir is None:
        return None
    common = git_dir
    pointer = _read(git_dir / "commondir")
    if pointer is not None:
        common = git_dir / pointer.decode(errors="surrogateescape").strip()
    config = parse_git_config((_read(common / "config") or b"").decode(errors="replace"))
    settings = {(e.section, e.subsection, e.key): e.value for e in config}
    sha256 = (settings.get(("extensions", None, "objectformat")) or "").lower() == "sha256"
    ignore_case = (settings.get(("core", None, "ignorecase")) or "").lower() in ("true", "1")
    index = git_dir / "index"
    try:
        paths = _index_paths(index, git_dir, _SHA256_BYTES if sha256 else _SHA1_BYTES)
    except (ValueError, struct.error, IndexError) as error:
        raise ConfigError(f"cannot read the git index {index}: {error}") from None
    return Checkout(git_dir, common, Tracked.of(paths), ignore_case)


def _git_dir(worktree: Path) -> Path | None:
    dot = worktree / ".git"
    if dot.is_dir():
        return dot
    text = _read(dot)
    if text is None or not text.startswith(b"gitdir:"):
        return None
    target = worktree / text[len(b"gitdir:") :].decode(errors="surrogateescape").strip()
    return target if target.is_dir() else None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def _index_paths(index: Path, git_dir: Path, hash_bytes: int) -> set[str]:
    """Every path of the index (and of the shared index a split index names)."""
    data = _read(index)
    if data is None:
        return set()  # nothing added yet
    paths, shared = _entries(data, hash_bytes)
    if shared is not None:
        shared_data = _read(git_dir / f"sharedindex.{shared}")
        if shared_data is None:
            raise ValueError(f"its shared index sharedindex.{shared} is missing")
        # A path the split index deleted is counted as tracked still: it only ships a file
        # that is there and that the index listed a moment ago.
        paths |= _entries(shared_data, hash_bytes)[0]
    return paths


def _entries(data: bytes, hash_bytes: int) -> tuple[set[str], str | None]:
    """An index file's paths, and the shared index it links to (a split index), if any."""
    if data[:4] != b"DIRC":
        raise ValueError("not an index file")
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        raise ValueError(f"index version {version} is not known")
    position, previous = 12, b""
    paths: set[str] = set()
    for _ in range(count):
        start = position
        flags_at = start + _STAT_BYTES + hash_bytes
        (flags,) = struct.unpack_from(">H", data, flags_at)
        position = flags_at + (4 if version >= 3 and flags & 0x4000 else 2)
        if version == 4:
            strip, position = _varint(data, position)
            if strip > len(previous):
                raise ValueError("a path is compressed against a shorter one")
            end = data.index(b"\0", position)
            name = previous[: len(previous) - strip] + data[position:end]
            position = end + 1
        else:
            end = data.index(b"\0", position)
            name = data[position:end]
            position = start + ((end - start + 8) & ~7)
        previous = name
        paths.add(os.fsdecode(name.rstrip(b"/")))  # a sparse index lists directories
    return paths, _shared_index(data, position, hash_bytes)


def _shared_index(data: bytes, position: int, hash_bytes: int) -> str | None:
    """The object id of the shared index in the `link` extension, if there is one."""
    while position + 8 <= len(data) - hash_bytes:
        signature = data[position : position + 4]
        (size,) = struct.unpack_from(">I", data, position + 4)
        if signature == b"link":
            return data[position + 8 : position + 8 + hash_bytes].hex()
        position += 8 + size
    return None


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """git's offset encoding of a number (index version 4)."""
    byte = data[position]
    position += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[position]
        position += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, position
