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
