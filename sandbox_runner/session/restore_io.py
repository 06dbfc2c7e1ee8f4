"""The repository's files as /undo reads and writes them, on the host: one component at a
time from the repository with O_NOFOLLOW, so that no link (planted by the agent, say) can
lead a read or a write out of it. A file is put back by writing a new file beside it and
renaming it over the old name: a link at that name is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from pathlib import Path

from sandbox_runner.errors import PlanrunError
from sandbox_runner.session.shadow_git import MAX_SNAPSHOT_FILE_BYTES, Entry

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
LINK_MODE = "120000"
OTHER = Entry("other", "")
"""Something no snapshot holds: a directory, a FIFO, a file too large to keep."""
GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


class RestoreError(PlanrunError):
    """A file could not be put back safely."""


def git_blob_id(data: bytes) -> str:
    """The id git gives a file of DATA."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def current_entry(workspace: Path, path: str) -> Entry | None:
    """PATH in the repository now, as a snapshot would hold it: None when it is not
    there (a link among its directories counts as not there: a snapshot would hold the
    link), OTHER when it is neither a file nor a link."""
    parts = _parts(path)
    try:
        parent = _walk(workspace, parts[:-1], create=False)
    except OSError as error:
        if error.errno in GONE:
            return None
        raise RestoreError(f"cannot look at {path}: {error.strerror}") from None
    try:
        info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(parts[-1], dir_fd=parent)
            return Entry(LINK_MODE, git_blob_id(os.fsencode(target)))
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SNAPSHOT_FILE_BYTES:
            return OTHER
        data = _read(parent, parts[-1])
        return Entry("100755" if info.st_mode & stat.S_IXUSR else "100644", git_blob_id(data))
    except OSError as error:
        if error.errno == errno.ENOENT:
            return None
        return OTHER
    finally:
        os.close(parent)


def remove(workspace: Path, path: str) -> None:
    """Remove the file or link at PATH (nothing when it is not there)."""
    parts = _parts(path)
    try:
        parent = _walk(workspace, parts[:-1], create=False)
    except OSError as error:
        if error.errno in GONE:
            return
        raise RestoreError(f"cannot remove {path}: {error.strerror}") from None
    try:
        os.unlink(parts[-1], dir_fd=parent)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise RestoreError(f"cannot remove {path}: {error.strerror}") from None
    finally:
        os.close(parent)


def put(workspace: Path, path: str, entry: Entry, data: bytes) -> None:
    """Make PATH the file (or link) ENTRY with DATA, its directories made as needed and
    owned like the repository."""
    parts = _parts(path)
    owner = _owner(workspace)
    try:
        parent = _walk(workspace, parts[:-1], create=True, owner=owner)
    except OSError as error:
        raise RestoreError(f"cannot restore {path}: {error.strerror} on the way") from None
    temporary = f".planrun-undo-{secrets.token_hex(6)}"
    try:
        if entry.mode == LINK_MODE:
            os.symlink(os.fsdecode(data), temporary, dir_fd=parent)
        else:
            _write_new(parent, temporary, data, 0o755 if entry.mode == "100755" else 0o644)
        os.chown(temporary, *owner, dir_fd=parent, follow_symlinks=False)
        os.rename(temporary, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
    except OSError as error:
        _discard(parent, temporary)
        raise RestoreError(f"cannot restore {path}: {error.strerror}") from None
    finally:
        os.close(parent)


def _parts(path: str) -> list[str]:
    parts = path.split("/")
    if not path or any(part in ("", ".", "..") or part.casefold() == ".git" for part in parts):
        raise RestoreError(f"not a path /undo writes: {path}")
    return parts


def _walk(
    workspace: Path, directories: list[str], *, create: bool, owner: tuple[int, int] = (-1, -1)
) -> int:
    """An open descriptor of WORKSPACE/DIRECTORIES, no link followed on the way."""
    fd = os.open(workspace, DIRECTORY_FLAGS)
    for name in directories:
        try:
            if create:
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            child = os.open(name, DIRECTORY_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _read(parent: int, name: str) -> bytes:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=parent)
    try:
        chunks, size = [], 0
        while chunk := os.read(fd, 1024 * 1024):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_SNAPSHOT_FILE_BYTES:
                raise OSError(errno.EFBIG, "too large")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _write_new(parent: int, name: str, data: bytes, mode: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, mode, dir_fd=parent)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _discard(parent: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=parent)


def _owner(workspace: Path) -> tuple[int, int]:
    """Who a restored file belongs to: the repository's owner when planrun runs as root
    (else the file would be root's, and the work container could not write it)."""
    if os.getuid() != 0:
        return -1, -1
    info = os.stat(workspace)
    return info.st_uid, info.st_gid
