"""The workspace walked in Python, for a machine without GNU find: the same records as
find writes (sandbox/host_walk/find.py), a scandir per directory and an lstat per entry."""

from __future__ import annotations

import hashlib
import os
import stat
import time
import zlib

from sandbox_runner.sandbox.host_walk.tree import DIGEST_PREFIX, FileTree

__all__ = ["python_walk"]

_KIND_LETTERS = {
    stat.S_IFREG: "f",
    stat.S_IFDIR: "d",
    stat.S_IFLNK: "l",
    stat.S_IFIFO: "p",
    stat.S_IFSOCK: "s",
    stat.S_IFBLK: "b",
    stat.S_IFCHR: "c",
}


def python_walk(root: str, excluded: str | None, time_limit: float | None) -> FileTree:
    """Walk ROOT (links not followed, EXCLUDED left out) into a FileTree."""
    started = time.monotonic()
    deadline = None if time_limit is None else started + time_limit
    hasher, compressor = hashlib.sha256(), zlib.compressobj(1)
    chunks: list[bytes] = []
    unreadable: list[str] = []
    count, stack = 0, [""]
    while stack:
        if deadline is not None and time.monotonic() >= deadline:
            return FileTree("", count, time.monotonic() - started, complete=False)
        relative = stack.pop()
        path = os.path.join(root, relative) if relative else root
        data = b""
        if not relative:
            try:
                data = record("", os.lstat(root), "")
                count += 1
            except OSError:
                pass  # gone: its listing below fails too, and says so
        try:
            with os.scandir(path) as scan:
                entries = list(scan)
        except OSError:
            unreadable.append(relative or ".")
            entries = []
        parts = [data]
        for entry in entries:
            if excluded is not None and entry.path == excluded:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            name = f"{relative}/{entry.name}" if relative else entry.name
            link = _link(entry.path) if stat.S_ISLNK(info.st_mode) else ""
            if stat.S_ISDIR(info.st_mode):
                stack.append(name)
            parts.append(record(name, info, link))
        count += len(parts) - 1
        blob = b"".join(parts)
        hasher.update(blob)
        chunks.append(compressor.compress(blob))
    chunks.append(compressor.flush())
    seconds = time.monotonic() - started
    digest = f"{DIGEST_PREFIX}{hasher.hexdigest()}"
    return FileTree(digest, count, seconds, True, tuple(chunks), tuple(unreadable))


def record(name: str, info: os.stat_result, link: str) -> bytes:
    """One entry as find's `%P NUL %y%m %s %T@ NUL %l NUL` writes it."""
    kind = _KIND_LETTERS.get(stat.S_IFMT(info.st_mode), "U")
    seconds, nanoseconds = divmod(info.st_mtime_ns, 1_000_000_000)
    fields = f"{kind}{stat.S_IMODE(info.st_mode):o} {info.st_size} {seconds}.{nanoseconds:09d}0"
    return os.fsencode(f"{name}\0{fields}\0{link}\0")


def _link(path: str) -> str:
    # /proc's links (planning "/") cannot all be read; such a link is recorded as unreadable.
    try:
        return os.readlink(path)
    except OSError as error:
        return f"<unreadable: {error.errno}>"
