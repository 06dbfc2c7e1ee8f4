"""What a batch run does with each job: its key, its fingerprint, and the resume decision."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sandbox_runner.batch.ledger import LedgerRecord
from sandbox_runner.plans.document import split_document
from sandbox_runner.plans.results import PlanStatus

FINGERPRINT_KEY = "batch_fingerprint"
ATTEMPT_KEY = "batch_attempt"
"""Front-matter keys of a plan a batch committed."""


class Action(StrEnum):
    """What happens to a job in this run."""

    RUN = "run"
    """Never finished (new, or running when the driver stopped)."""
    RETRY = "retry"
    """Failed before; --retry-failed: the old attempt is moved aside, then run."""
    REDO = "redo"
    """--redo: every earlier output is moved aside, then run."""
    SKIP_COMPLETE = "skip (complete)"
    SKIP_FAILED = "skip (failed)"
    ADOPT = "adopt"
    """A complete plan whose ledger line was lost in a crash: recorded, not run."""
    REFUSED = "refused (changed)"


RUNS = frozenset({Action.RUN, Action.RETRY, Action.REDO})


@dataclass(frozen=True)
class OnDisk:
    """A committed plan file of a job, as its front matter describes it."""

    fingerprint: str
    attempt: int
    valid: bool


@dataclass(frozen=True)
class Decision:
    """The action for one job and whether files of earlier attempts go to .attempts first."""

    action: Action
    move_aside: bool = False
    attempt: int = 1
    """The number of the attempt this run makes (or adopts)."""


def fingerprint(parts: dict[str, object]) -> str:
    """sha256 of the canonical JSON of what shapes a job's output."""
    canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def plan_on_disk(plan_file: Path) -> OnDisk | None:
    """The batch metadata of a committed plan, or None when there is none to trust."""
    try:
        text = plan_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    metadata, _ = split_document(text)
    found, attempt = metadata.get(FINGERPRINT_KEY), metadata.get(ATTEMPT_KEY)
    if not isinstance(found, str) or not isinstance(attempt, int):
        return None
    valid = metadata.get("valid") is True and metadata.get("status") == "complete"
    return OnDisk(found, attempt, valid)


def decide(
    current: str,
    last: LedgerRecord | None,
    attempts: int,
    disk: OnDisk | None,
    *,
    leftovers: bool = False,
    retry_failed: bool = False,
    redo: bool = False,
) -> Decision:
    """The resume decision for one job.

    Args:
        current: the job's fingerprint now.
        last: its last ledger record, if any; attempts: how many it has.
        disk: its committed plan file, if any; leftovers: other files of it exist.
    """
    following = attempts + 1
    recorded = last.attempt if last is not None else 0
    has_files = leftovers or disk is not None
    if redo:
        return Decision(Action.REDO if has_files or last else Action.RUN, has_files, following)
    if disk is not None and disk.attempt > recorded:
        # Committed, but the driver died before its ledger line.
        if disk.fingerprint == current and disk.valid:
            return Decision(Action.ADOPT, False, disk.attempt)
        return Decision(Action.RUN, True, max(following, disk.attempt + 1))
    if last is None:
        return Decision(Action.RUN, has_files, following)
    if last.fingerprint != current:
        return Decision(Action.REFUSED, False, following)
    if last.complete:
        return Decision(Action.SKIP_COMPLETE, False, last.attempt)
    if retry_failed or last.status == PlanStatus.BUDGET:
        # A job the budget stopped (or never started) runs when the batch is resumed.
        return Decision(Action.RETRY, has_files, following)
    return Decision(Action.SKIP_FAILED, False, last.attempt)
