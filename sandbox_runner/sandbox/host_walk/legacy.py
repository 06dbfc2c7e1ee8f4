"""The digest of a workspace as planrun computed it before its walks went through find:
what a run or batch recorded then is compared with this (a digest without
tree.DIGEST_PREFIX), so that it can still be resumed.

Every directory's entries, sorted by name, as lines `path NUL mode NUL size NUL mtime NUL
link`, depth first (an explicit stack: any depth is fine), hashed with sha256.
"""

from __future__ import annotations

import hashlib
import os
import stat
from operator import attrgetter

__all__ = ["legacy_fingerprint"]

_BY_NAME = attrgetter("name")


def legacy_fingerprint(
    workspace: os.PathLike[str] | str, *, exclude: os.PathLike[str] | str | None = None
) -> str:
    """The earlier digest of every path's type, mode, size, mtime and link target."""
    hasher = hashlib.sha256()
    root, excluded = os.fspath(workspace), None if exclude is None else os.fspath(exclude)
    stack = [""]
    while stack:
        relative = stack.pop()
        blob, subdirectories = _directory(root, relative, excluded)
        hasher.update(blob)
        stack.extend(reversed(subdirectories))
    return hasher.hexdigest()


def _directory(root: str, relative: str, excluded: str | None) -> tuple[bytes, list[str]]:
    path = f"{root}/{relative}" if relative else root
    try:
        with os.scandir(path) as scan:
            entries = sorted(scan, key=_BY_NAME)
    except OSError as error:
        return os.fsencode(f"{relative or '.'}\0unreadable {error.errno}\n"), []
    prefix = f"{relative}/" if relative else ""
    lines, subdirectories = [], []
    for entry in entries:
        if excluded is not None and entry.path == excluded:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        name, link = prefix + entry.name, ""
        if stat.S_ISLNK(info.st_mode):
            try:
                link = os.readlink(entry.path)
            except OSError as error:
                link = f"<unreadable: {error.errno}>"
        elif stat.S_ISDIR(info.st_mode):
            subdirectories.append(name)
        lines.append(f"{name}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0{link}\n")
    return os.fsencode("".join(lines)), subdirectories
