"""A batch's ledger (results.jsonl: one line per finished attempt, appended and synced) and
the lock that keeps a second driver off the same output directory."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.errors import ConfigError

LEDGER_NAME = "results.jsonl"
LOCK_NAME = "batch.lock"
LOCK_TRIES = 10
RUN_LOCK = "run.lock"
"""Held by `planrun plan` while it writes a run, and by `planrun plans resume`."""
COMPLETE = "complete"
FAILED_STATUSES = frozenset({"failed", "incomplete", "invalid", "error"})


@dataclass(frozen=True)
class LedgerRecord:
    """One finished attempt of one job."""

    key: str
    """`<task id>/<perspective label>`."""
    fingerprint: str
    status: str
    """complete (and valid), invalid, incomplete, failed or error."""
    attempt: int
    reason: str = ""
    node: str = ""
    started_at: str = ""
    finished_at: str = ""
    tokens: int = 0
    cost_usd: float | None = None
    wall_seconds: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    """PlanResult.to_dict() of the attempt (its plan text is in the plan file)."""

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE

    def to_json(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> LedgerRecord | None:
        """The record of a line; None for a torn or foreign line."""
        try:
            data = json.loads(line)
            return cls(**data) if isinstance(data, dict) else None
        except (ValueError, TypeError):
            return None


class Ledger:
    """results.jsonl of one batch directory; only the driver appends to it."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / LEDGER_NAME

    def read(self) -> list[LedgerRecord]:
        """Every record, oldest first. A torn last line (the driver died while writing it)
        and any unreadable line are ignored: that attempt counts as not finished."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        records = (LedgerRecord.from_json(line) for line in text.split("\n") if line.strip())
        return [record for record in records if record is not None]

    def last_by_key(self) -> dict[str, tuple[LedgerRecord, int]]:
        """Per key: its last record and how many attempts were recorded."""
        found: dict[str, tuple[LedgerRecord, int]] = {}
        for record in self.read():
            _, count = found.get(record.key, (record, 0))
            found[record.key] = (record, count + 1)
        return found

    def append(self, record: LedgerRecord) -> None:
        """Append one line and sync it to disk before returning."""
        self._heal_torn_tail()
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(self.path, flags, 0o644)
        try:
            os.write(descriptor, (record.to_json() + "\n").encode("utf-8"))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def _heal_torn_tail(self) -> None:
        # A line torn by a crash has no newline; the next record must not be glued to it.
        try:
            with self.path.open("rb") as handle:
                handle.seek(-1, os.SEEK_END)
                last = handle.read(1)
        except (FileNotFoundError, OSError):
            return
        if last != b"\n":
            with self.path.open("ab") as handle:
                handle.write(b"\n")


class BatchLock:
    """An exclusive flock on `<out>/batch.lock` (or another name), held while a driver (or
    a plan run) runs; the file says who holds it."""

    def __init__(
        self, out_dir: Path, *, name: str = LOCK_NAME, what: str = "planrun batch"
    ) -> None:
        self.path = out_dir / name
        self.what = what
        self._descriptor: int | None = None

    def __enter__(self) -> BatchLock:
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
