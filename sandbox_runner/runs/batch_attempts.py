"""Earlier attempts of a batch's jobs, kept aside in `tasks/<id>/.attempts/<label>/<tag>/`
(never deleted), and the one a new attempt goes on with when its conversation can continue.

Each attempt directory holds the plan and transcript it left and `attempt.json`: whose
fingerprint it ran under, whether its conversation can go on, why it stopped, and when
it was put aside (the newest attempt is the one to go on with, or none).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runner.plans.files import write_new
from sandbox_runner.runs.batch_job import MAX_RETURNED_BYTES, SCRATCH_IDENTITY
from sandbox_runner.runs.plan_job import EarlierAttempt
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

ATTEMPTS_DIR = ".attempts"
ATTEMPT_NOTE = "attempt.json"
IN_FLIGHT = "in flight when the batch stopped"


@dataclass(frozen=True)
class AttemptNote:
    """Why an attempt was put aside, and whether a later one may go on with it."""

    fingerprint: str
    resumable: bool
    reason: str

    def to_json(self) -> str:
        fields = {**vars(self), "set_aside_ns": time.time_ns()}
        return json.dumps(fields, ensure_ascii=False)


def move_aside(directory: Path, label: str, tag: str, note: AttemptNote) -> Path | None:
    """Move a job's plan and transcript to `.attempts/<label>/<tag>/`; nothing is deleted."""
    files = [directory / f"{label}.md", directory / f"{label}.transcript.jsonl"]
    present = [path for path in files if path.exists() or path.is_symlink()]
    if not present:
        return None
    target = _new_attempt_dir(directory, label, tag)
    for path in present:
        os.rename(path, target / path.name)
    write_new(target / ATTEMPT_NOTE, note.to_json())
    return target


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
        identity = _read_json(scratch / SCRATCH_IDENTITY)
        key, label = identity.get("key"), identity.get("label")
        directory = task_dirs.get(str(key))
        transcript = scratch / f"{label}.transcript.jsonl"
        if directory is not None and isinstance(label, str) and transcript.is_file():
            target = _new_attempt_dir(directory, label, "interrupted")
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


def earlier_attempt(directory: Path, label: str, fingerprint: str) -> EarlierAttempt | None:
    """The newest attempt of a job, when its conversation can go on under this fingerprint."""
    newest: tuple[int, Path, dict[str, Any]] | None = None
    attempts = directory / ATTEMPTS_DIR / label
    for attempt in attempts.iterdir() if attempts.is_dir() else ():
        note = _read_json(attempt / ATTEMPT_NOTE)
        set_aside = note.get("set_aside_ns")
        if isinstance(set_aside, int) and (newest is None or set_aside > newest[0]):
            newest = (set_aside, attempt, note)
    if newest is None:
        return None
    _, attempt, note = newest
    if note.get("resumable") is not True or note.get("fingerprint") != fingerprint:
        return None
    transcript = _read_text(attempt / f"{label}.transcript.jsonl")
    if not transcript:
        return None
    return EarlierAttempt(transcript, _read_text(attempt / f"{label}.md"), str(note["reason"]))


def _new_attempt_dir(directory: Path, label: str, tag: str) -> Path:
    target, number = directory / ATTEMPTS_DIR / label / tag, 2
    while target.exists():
        target, number = directory / ATTEMPTS_DIR / label / f"{tag}-{number}", number + 1
    target.mkdir(parents=True)
    return target


def _read_json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(_read_text(path) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _read_text(path: Path) -> str | None:
    try:
        data = read_untrusted_bytes(path, MAX_RETURNED_BYTES, follow_symlinks=False)
    except (UnsafeFileError, OSError):
        return None
    return None if data is None else data.decode("utf-8", errors="replace")
