"""Reading what a sandbox wrote, as hostile input, and writing plans without overwriting."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sandbox_runner.errors import PlanrunError

MAX_PLAN_BYTES = 2 * 1024 * 1024


class UnsafePlanFileError(PlanrunError):
    """A file the sandbox left is not a plain regular file, or is too large."""


def read_sandbox_file(path: Path, max_bytes: int = MAX_PLAN_BYTES) -> str | None:
    """Return the text of a file in a sandbox's plan directory, or None if it is absent.

    Never follows a symlink (also not in the parent directories below the plan
    directory the host created), never opens a FIFO or device, and reads at most
    max_bytes.

    Raises:
        UnsafePlanFileError: the path is a symlink, not a regular file, or too large.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if path.is_symlink():
            raise UnsafePlanFileError(
                f"{path} is a symbolic link; planrun does not follow it"
            ) from None
        raise UnsafePlanFileError(f"cannot read {path}: {error.strerror}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePlanFileError(f"{path} is not a regular file")
        if info.st_nlink > 1:
            raise UnsafePlanFileError(
                f"{path} has {info.st_nlink} hard links; planrun does not read it"
            )
        if info.st_size > max_bytes:
            raise UnsafePlanFileError(f"{path} is {info.st_size} bytes; the limit is {max_bytes}")
        data = os.read(descriptor, max_bytes + 1)
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        raise UnsafePlanFileError(f"{path} grew past the {max_bytes} byte limit")
    return data.decode("utf-8", errors="replace")


def write_new(path: Path, text: str) -> None:
    """Write a file that must not exist yet; an existing file is never overwritten.

    Raises:
        FileExistsError: something already exists at path.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def replace_file(path: Path, text: str) -> None:
    """Replace a file atomically; a symlink planted at path is replaced, never followed."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write_new(temporary, text)
    os.replace(temporary, path)


def append_line(path: Path, line: str) -> None:
    """Append one line to a host-owned log (a transcript), flushing it to disk at once."""
    descriptor = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
        handle.write(line.rstrip("\n") + "\n")
