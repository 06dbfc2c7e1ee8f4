"""What the batch driver tells the display as jobs start and finish, and how a run ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["BatchEvents", "BatchOutcome", "NoEvents"]


class BatchEvents(Protocol):
    """Job-level progress: what the driver tells the display."""

    def job_started(self, key: str, note: str = "") -> None: ...

    def job_finished(self, key: str, status: str, cost_usd: float | None) -> None: ...

    def job_queued(self, key: str) -> None:
        """A job decided while the batch runs (a task's synthesis) joins the queue."""


class NoEvents:
    """Progress that shows nothing (--json, tests, benchmarks)."""

    def job_queued(self, key: str) -> None:
        pass

    def job_started(self, key: str, note: str = "") -> None:
        pass

    def job_finished(self, key: str, status: str, cost_usd: float | None) -> None:
        pass


@dataclass
class BatchOutcome:
    """How a batch run ended."""

    exit_code: int
    summary: dict[str, Any]
    interrupted: bool = False
