"""The jobs a batch driver had in flight when it stopped: their scratch holds the
conversation so far, kept aside as an attempt for the next run to go on with."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from sandbox_runner.batch.job import SCRATCH_IDENTITY
from sandbox_runner.plans.files import write_new
from sandbox_runner.runs.attempts import (
    ATTEMPT_NOTE,
    AttemptNote,
    can_go_on,
    earlier_attempt,
    new_attempt_dir,
    read_json,
    read_text,
)

IN_FLIGHT = "in flight when the batch stopped"


def salvage_scratch(scratch_root: Path, jobs: dict[str, tuple[Path, str]]) -> int:
    """Keep the conversations of jobs that were in flight when an earlier driver stopped
    (their scratch holds the transcript so far), and remove the scratch they leave.

    Args:
        jobs: the run directory and label of each job of this run, by job key. The
            scratch of other jobs (left out by --only, or renamed) stays for a later run.
    Returns:
        How many conversations were kept.
    """
    kept = 0
    if not scratch_root.is_dir():
        return kept
    for scratch in sorted(scratch_root.iterdir()):
        identity = read_json(scratch / SCRATCH_IDENTITY)
        found = jobs.get(str(identity.get("key")))
        if found is None:
            continue
        directory, label = found
        transcript = scratch / f"{label}.transcript.jsonl"
        if transcript.is_file() and not transcript.is_symlink():
            # A job stopped before its task wrote anything: the task has no directory yet.
            directory.mkdir(parents=True, exist_ok=True)
            target = new_attempt_dir(directory, label, "interrupted")
            os.rename(transcript, target / transcript.name)
            draft = scratch / ".sandbox" / label / f"{label}.md"
            if draft.is_file() and not draft.is_symlink():
                os.rename(draft, target / f"{label}.md")
            note = AttemptNote(str(identity.get("fingerprint") or ""), True, IN_FLIGHT)
            write_new(target / ATTEMPT_NOTE, note.to_json())
            kept += 1
        shutil.rmtree(scratch, ignore_errors=True)
    with contextlib.suppress(OSError):
        scratch_root.rmdir()  # when nothing is left for a later run
    return kept


def would_go_on(
    directory: Path, label: str, fingerprint: str, retry_resumable: bool | None, scratch_root: Path
) -> bool:
    """Whether a job's next attempt would go on with a conversation (for --dry-run: it
    reads, moves nothing). retry_resumable: for a retried job, whether its last attempt
    is recorded as resumable (None for a job that simply runs)."""
    if retry_resumable is not None:
        transcript = read_text(directory / f"{label}.transcript.jsonl")
        return retry_resumable and bool(transcript) and can_go_on(transcript or "")
    if scratch_root.is_dir():
        for scratch in scratch_root.iterdir():
            identity = read_json(scratch / SCRATCH_IDENTITY)
            same = identity.get("label") == label and identity.get("fingerprint") == fingerprint
            transcript = read_text(scratch / f"{label}.transcript.jsonl") if same else None
            if transcript and can_go_on(transcript):
                return True
    return earlier_attempt(directory, label, fingerprint) is not None
