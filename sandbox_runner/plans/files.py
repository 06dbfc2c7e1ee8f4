"""Reading what a sandbox wrote, as hostile input, and writing plans without overwriting."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox_runner.limits import MAX_PLAN_BYTES
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

__all__ = ["UnsafeFileError", "append_line", "read_sandbox_file", "replace_file", "write_new"]


def read_sandbox_file(path: Path, max_bytes: int = MAX_PLAN_BYTES) -> str | None:
    """Return the text of a file in a sandbox's plan directory, or None if it is absent.

    Never follows a symlink in the last component, never opens a FIFO or device, refuses
    a file with other hard links, and reads at most max_bytes.

    Raises:
        UnsafeFileError: the path is a symlink, not a regular file, linked, or too large.
    """
    data = read_untrusted_bytes(path, max_bytes, follow_symlinks=False, single_link=True)
    return None if data is None else data.decode("utf-8", errors="replace")


def write_new(path: Path, text: str) -> None:
    """Write a file that must not exist yet; an existing file is never overwritten.

    Raises:
        FileExistsError: something already exists at path.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )
    with os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(text)


def replace_file(path: Path, text: str) -> None:
    """Replace a file atomically; a symlink planted at path is replaced, never followed."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write_new(temporary, text)
    os.replace(temporary, path)


def append_line(path: Path, line: str) -> None:
    """Append one line to a host-owned log (a transcript), flushing it to disk at once."""
    append_lines(path, [line])


def append_lines(path: Path, lines: list[str]) -> None:
    """Append lines to a host-owned log in one write, flushing it to disk at once."""
    descriptor = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
    )
    with os.fdopen(descriptor, "a", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write("".join(line.rstrip("\n") + "\n" for line in lines))
