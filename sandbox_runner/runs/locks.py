"""The exclusive lock on an output directory that keeps a second writer off it: a plan run
and `planrun plans resume` take `run.lock`, a batch driver `batch.lock`."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from sandbox_runner.errors import ConfigError

RUN_LOCK = "run.lock"
"""Held by `planrun plan` while it writes a run, and by `planrun plans resume`."""
LOCK_TRIES = 10


class DirectoryLock:
    """An exclusive flock on `<directory>/<name>`, held while one writer (a plan run, a
    batch driver) works there; the file says who holds it."""

    def __init__(self, directory: Path, *, name: str, what: str) -> None:
        self.path = directory / name
        self.what = what
        self._descriptor: int | None = None

    def __enter__(self) -> DirectoryLock:
        try:
            descriptor = os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
            )
        except OSError as error:
            raise ConfigError(f"cannot lock {self.path}: {error.strerror}") from None
        try:
            _lock_soon(descriptor)
        except BlockingIOError:
            holder = os.read(descriptor, 200).decode(errors="replace").strip()
            os.close(descriptor)
            pid, _, what = holder.partition(" ")
            raise ConfigError(
                f"another {what or 'planrun'} (pid {pid or '?'}) is running in "
                f"{self.path.parent}; wait for it, or stop it"
            ) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()} {self.what}".encode())
        self._descriptor = descriptor
        return self

    def __exit__(self, *exc: object) -> None:
        if self._descriptor is not None:
            with contextlib.suppress(OSError):
                os.close(self._descriptor)
            self._descriptor = None


def _lock_soon(descriptor: int) -> None:
    """The exclusive lock, retried for a moment: `planrun plans list` holds a shared one
    for an instant to see whether a run is being written.

    Raises:
        BlockingIOError: another process holds it.
    """
    for _ in range(LOCK_TRIES - 1):
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(0.02)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
