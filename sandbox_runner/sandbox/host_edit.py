"""Writes to protected files, made by planrun on the host after the user approved them.

The work sandbox cannot write these files (their mounts are read-only, and what it plants
is moved out), so an approved Write or Edit of one is done here: component by component
from the workspace with O_NOFOLLOW, so that no link planted in the repository can send
the write elsewhere, and owned like the workspace.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sandbox_runner.types import ExecResult, ToolRequest

MAX_PROTECTED_BYTES = 1024 * 1024
"""Protected files are configuration: anything larger is refused."""


def host_edit(workspace: Path, relative: str, request: ToolRequest) -> ExecResult:
    """Apply an approved write or edit of WORKSPACE/RELATIVE; never raises for bad input."""
    parts = [part for part in relative.split("/") if part]
    if not parts or any(part in (".", "..") for part in parts):
        return _error(f"Not a path inside the repository: {relative}")
    try:
        parent = _open_parent(workspace, parts[:-1], create=request.op == "write")
        try:
            if request.op == "write":
                data = str(request.args.get("content", "")).encode("utf-8", "replace")
                message = f"File written: {relative} ({len(data)} bytes, by planrun on the host)"
            else:
                data, message = _edited(parent, parts[-1], relative, request.args)
            if len(data) > MAX_PROTECTED_BYTES:
                return _error(f"{relative} would be over 1 MiB; protected files are configuration")
            _replace(parent, parts[-1], data, _owner(workspace))
        finally:
            os.close(parent)
    except _Refused as refused:
        return _error(str(refused))
    except OSError as error:
        return _error(f"Could not write {relative}: {error.strerror or error}")
    return ExecResult(True, message)


class _Refused(Exception):
    pass


def _error(message: str) -> ExecResult:
    return ExecResult(False, "", error=message)


def _open_parent(workspace: Path, directories: list[str], *, create: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(workspace, flags)
    owner = _owner(workspace)
    for name in directories:
        try:
            if create and not _exists(fd, name):
                os.mkdir(name, 0o755, dir_fd=fd)
                os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
            child = os.open(name, flags, dir_fd=fd)
        except OSError as error:
            os.close(fd)
            reason = error.strerror or str(error)
            raise _Refused(f"{name} is not a directory planrun can write into ({reason})") from None
        os.close(fd)
        fd = child
    return fd


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _edited(parent: int, name: str, shown: str, args: dict[str, object]) -> tuple[bytes, str]:
    old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
    replace_all = bool(args.get("replace_all", False))
    if not old or old == new:
        raise _Refused("old_string must be non-empty and differ from new_string")
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent
        )
    except OSError as error:
        raise _Refused(f"Cannot read {shown}: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > MAX_PROTECTED_BYTES:
            raise _Refused(f"Not a regular file of at most 1 MiB: {shown}")
        text = os.read(fd, MAX_PROTECTED_BYTES + 1).decode("utf-8", "replace")
    finally:
        os.close(fd)
    count = text.count(old)
    if count == 0:
        raise _Refused(f"old_string not found in file: {shown}")
    if count > 1 and not replace_all:
        raise _Refused(f"old_string is not unique in file ({count} occurrences)")
    data = text.replace(old, new, -1 if replace_all else 1).encode("utf-8", "replace")
    done = count if replace_all else 1
    return data, f"File edited: {shown} ({done} replacement(s), by planrun on the host)"


def _replace(parent: int, name: str, data: bytes, owner: tuple[int, int]) -> None:
    """Write NAME in place (a file mounted read-only into a running sandbox keeps its
    inode, so the sandbox sees the new text), or create it; a link is never followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, 0o644, dir_fd=parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _Refused(f"Not a regular file: {name}")
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchown(fd, *owner)
    finally:
        os.close(fd)


def _owner(workspace: Path) -> tuple[int, int]:
    info = os.stat(workspace)
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    return info.st_uid, info.st_gid
