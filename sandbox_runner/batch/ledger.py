"""A batch's ledger (results.jsonl: one line per finished attempt, appended and synced) and
the lock that keeps a second driver off the same output directory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.runs.locks import DirectoryLock

LEDGER_NAME = "results.jsonl"
LOCK_NAME = "batch.lock"
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


def batch_lock(out_dir: Path) -> DirectoryLock:
    """The lock that keeps a second driver off a batch's output directory."""
    return DirectoryLock(out_dir, name=LOCK_NAME, what="planrun batch")
