"""Earlier attempts of a plan, kept aside in `<run>/.attempts/<label>/<tag>/` (never
deleted), and the one a new attempt goes on with when its conversation can continue.

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

from sandbox_runner.agents.conversation import saved_conversation, transcript_lines
from sandbox_runner.errors import ConfigError
from sandbox_runner.plans.files import write_new
from sandbox_runner.runs.plan_job import EarlierAttempt
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

ATTEMPTS_DIR = ".attempts"
ATTEMPT_NOTE = "attempt.json"
MAX_ATTEMPT_BYTES = 64 * 1024 * 1024
"""A transcript larger than this is not gone on with (a conversation that long is spent)."""


@dataclass(frozen=True)
class AttemptNote:
    """Why an attempt was put aside, and whether a later one may go on with it."""

    fingerprint: str
    resumable: bool
    reason: str

    def to_json(self) -> str:
        fields = {**vars(self), "set_aside_ns": time.time_ns()}
        return json.dumps(fields, ensure_ascii=False)


def move_aside(
    directory: Path, label: str, tag: str, note: AttemptNote, *, also: tuple[Path, ...] = ()
) -> Path | None:
    """Move a plan and its transcript (and `also`, which may lie on another filesystem) to
    `.attempts/<label>/<tag>/`; nothing is deleted.

    Raises:
        ConfigError: `.attempts` or its label's directory is a link (never followed).
    """
    files = [directory / f"{label}.md", directory / f"{label}.transcript.jsonl"]
    present = [path for path in files if path.exists() or path.is_symlink()]
    others = [path for path in also if path.exists() or path.is_symlink()]
    if not present and not others:
        return None
    target = new_attempt_dir(directory, label, tag)
    for path in present:
        os.rename(path, target / path.name)
    for path in others:
        shutil.move(path, target / path.name)
    write_new(target / ATTEMPT_NOTE, note.to_json())
    return target


def earlier_attempt(directory: Path, label: str, fingerprint: str) -> EarlierAttempt | None:
    """The newest attempt of a job that held a conversation, when that conversation can go
    on under this fingerprint."""
    newest: tuple[int, Path, dict[str, Any]] | None = None
    attempts = directory / ATTEMPTS_DIR / label
    for attempt in attempts.iterdir() if attempts.is_dir() else ():
        if not (attempt / f"{label}.transcript.jsonl").is_file():
            continue  # it held no conversation (a sandbox copy, a plan alone)
        note = read_json(attempt / ATTEMPT_NOTE)
        set_aside = note.get("set_aside_ns")
        if isinstance(set_aside, int) and (newest is None or set_aside > newest[0]):
            newest = (set_aside, attempt, note)
    if newest is None:
        return None
    _, attempt, note = newest
    if note.get("resumable") is not True or note.get("fingerprint") != fingerprint:
        return None
    transcript = read_text(attempt / f"{label}.transcript.jsonl")
    if not transcript or not can_go_on(transcript):
        return None
    return EarlierAttempt(transcript, read_text(attempt / f"{label}.md"), str(note["reason"]))


def can_go_on(transcript: str) -> bool:
    """Whether a transcript holds a conversation to go on with (at least one answer of
    the model, nothing lost on the way); a run stopped before its first answer has none."""
    return saved_conversation(transcript_lines(transcript)).intact


def new_attempt_dir(directory: Path, label: str, tag: str) -> Path:
    """A new `.attempts/<label>/<tag>[-n]/`; a link planted on the way is refused."""
    parent = directory
    for part in (ATTEMPTS_DIR, label):
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            raise ConfigError(f"{parent} is not a directory; planrun never writes through links")
        parent.mkdir(exist_ok=True)
    target, number = parent / tag, 2
    while target.exists() or target.is_symlink():
        target, number = parent / f"{tag}-{number}", number + 1
    target.mkdir()
    return target


def read_json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(read_text(path) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def read_text(path: Path) -> str | None:
    try:
        data = read_untrusted_bytes(path, MAX_ATTEMPT_BYTES, follow_symlinks=False)
    except (UnsafeFileError, OSError):
        return None
    return None if data is None else data.decode("utf-8", errors="replace")
