"""Reading files that someone else controls (a repository, a sandbox) without being led astray."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sandbox_runner.errors import PlanrunError


class UnsafeFileError(PlanrunError):
    """A file is not a plain regular file, is too large, or is a link where none may be."""


def read_untrusted_bytes(
    path: Path,
    max_bytes: int,
    *,
    follow_symlinks: bool = True,
    single_link: bool = False,
    truncate: bool = False,
) -> bytes | None:
    """Read at most max_bytes of a regular file; None when it does not exist.

    Never blocks on a FIFO or a device (opened non-blocking, then refused), never reads
    more than max_bytes (a link to /dev/zero cannot exhaust memory), and with
    follow_symlinks=False refuses a symlink in the last component. single_link refuses
    a file that has other hard links (a sandbox must not hand the host a shared inode).
    With truncate, a larger file is not an error: up to max_bytes + 1 bytes come back,
    so the caller can tell that it was cut.

    Raises:
        UnsafeFileError: not a regular file, larger than max_bytes, or unreadable.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as error:
        if not follow_symlinks and path.is_symlink():
            raise UnsafeFileError(
                f"{path} is a symbolic link; planrun does not follow it"
            ) from None
        raise UnsafeFileError(f"cannot read {path}: {error.strerror}") from None
    return _read_open_file(descriptor, path, max_bytes, single_link=single_link, truncate=truncate)


def read_beneath(
    root: Path, path: Path | str, max_bytes: int, *, truncate: bool = False
) -> bytes | None:
    """Read a file of a directory someone else controls (a repository) without leaving it.

    path (relative to root, or absolute) is resolved; a symbolic link may point anywhere
    beneath root, but a path that leads outside it, through `..` or a link, is refused.
    The file is then opened one component at a time from root, never following a link,
    so a link swapped in meanwhile cannot lead elsewhere either. Otherwise as
    read_untrusted_bytes: bounded, no FIFO or device; None when it does not exist.

    Raises:
        UnsafeFileError: the path leads outside root, or the file cannot be read safely.
    """
    real_root = root.resolve()
    candidate = Path(path) if Path(path).is_absolute() else root / path
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError) as error:  # a symbolic link loop
        raise UnsafeFileError(f"cannot read {candidate}: {error}") from None
    if not resolved.is_relative_to(real_root) or resolved == real_root:
        raise UnsafeFileError(
            f"{candidate} leads outside {root} (to {resolved}); planrun does not follow it"
        )
    parts = resolved.relative_to(real_root).parts
    directory = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory
            )
            os.close(directory)
            directory = inner
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(parts[-1], flags, dir_fd=directory)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UnsafeFileError(f"cannot read {candidate}: {error.strerror}") from None
    finally:
        os.close(directory)
    return _read_open_file(descriptor, candidate, max_bytes, single_link=False, truncate=truncate)


def _read_open_file(
    descriptor: int, path: Path, max_bytes: int, *, single_link: bool, truncate: bool
) -> bytes:
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"{path} is not a regular file")
        if single_link and info.st_nlink > 1:
            raise UnsafeFileError(
                f"{path} has {info.st_nlink} hard links; planrun does not read it"
            )
        if info.st_size > max_bytes and not truncate:
            raise UnsafeFileError(f"{path} is {info.st_size} bytes; the limit is {max_bytes}")
        data = os.read(descriptor, max_bytes + 1)
    except OSError as error:
        raise UnsafeFileError(f"cannot read {path}: {error.strerror}") from None
    finally:
        os.close(descriptor)
    if len(data) > max_bytes and not truncate:
        raise UnsafeFileError(f"{path} grew past the {max_bytes} byte limit")
    return data
