"""The jobs a batch driver had in flight when it stopped: their scratch holds the
conversation so far, kept aside as an attempt for the next run to go on with."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sandbox_runner.plans.files import write_new
from sandbox_runner.runs.attempts import (
    ATTEMPT_NOTE,
    AttemptNote,
    earlier_attempt,
    new_attempt_dir,
    read_json,
)
from sandbox_runner.runs.batch_job import SCRATCH_IDENTITY

IN_FLIGHT = "in flight when the batch stopped"


def salvage_scratch(scratch_root: Path, task_dirs: dict[str, Path]) -> int:
    """Keep the conversations of jobs that were in flight when an earlier driver stopped
    (their scratch holds the transcript so far), then remove the scratch.

    Args:
        task_dirs: the run directory of each job of the batch, by job key.
    Returns:
        How many conversations were kept.
    """
    kept = 0
    if not scratch_root.is_dir():
        return kept
    for scratch in sorted(scratch_root.iterdir()):
        identity = read_json(scratch / SCRATCH_IDENTITY)
        key, label = identity.get("key"), identity.get("label")
        directory = task_dirs.get(str(key))
        transcript = scratch / f"{label}.transcript.jsonl"
        if directory is not None and isinstance(label, str) and transcript.is_file():
            target = new_attempt_dir(directory, label, "interrupted")
            os.rename(transcript, target / transcript.name)
            draft = scratch / ".sandbox" / label / f"{label}.md"
            if draft.is_file() and not draft.is_symlink():
                os.rename(draft, target / f"{label}.md")
            note = AttemptNote(str(identity.get("fingerprint") or ""), True, IN_FLIGHT)
            write_new(target / ATTEMPT_NOTE, note.to_json())
            kept += 1
        shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(scratch_root, ignore_errors=True)
    return kept


def would_go_on(
    directory: Path, label: str, fingerprint: str, retry_resumable: bool | None, scratch_root: Path
) -> bool:
    """Whether a job's next attempt would go on with a conversation (for --dry-run: it
    reads, moves nothing). retry_resumable: for a retried job, whether its last attempt
    is recorded as resumable (None for a job that simply runs)."""
    if retry_resumable is not None:
        return retry_resumable and (directory / f"{label}.transcript.jsonl").is_file()
    if scratch_root.is_dir():
        for scratch in scratch_root.iterdir():
            identity = read_json(scratch / SCRATCH_IDENTITY)
            same = identity.get("label") == label and identity.get("fingerprint") == fingerprint
            if same and (scratch / f"{label}.transcript.jsonl").is_file():
                return True
    return earlier_attempt(directory, label, fingerprint) is not None
