"""Batches: many tasks × perspectives, resumable, on this machine or a Ray cluster."""

from sandbox_runner.batch.engines import BatchHost
from sandbox_runner.batch.events import BatchOutcome
from sandbox_runner.batch.run import (
    BatchOptions,
    BatchStart,
    BatchWatch,
    DryRun,
    PlannedJob,
    batch_status,
    dry_run,
    run_batch,
)

__all__ = [
    "BatchHost",
    "BatchOptions",
    "BatchOutcome",
    "BatchStart",
    "BatchWatch",
    "DryRun",
    "PlannedJob",
    "batch_status",
    "dry_run",
    "run_batch",
]
