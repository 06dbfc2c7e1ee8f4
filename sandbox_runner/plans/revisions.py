"""A plan's revisions: every text a plan file held, kept beside it, so that no change of a
plan goes without a trace.

The revisions of `<dir>/<name>.md` live in `<dir>/.revisions/<name>/`: `0001.md`,
`0002.md`, ... and `index.json` (number, time, source, size, sha256 of each). The store is
bounded (the newest KEEP_REVISIONS, and at most MAX_REVISION_BYTES in all; the index
counts what was pruned), written atomically (a revision is a new file, the index is
replaced by a rename), and never follows a symbolic link: a link where the store's
directories or files should be is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import stat
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox_runner.limits import MAX_PLAN_BYTES
from sandbox_runner.plans.files import read_sandbox_file, replace_file, write_new
from sandbox_runner.safe_io import UnsafeFileError

KEEP_REVISIONS = 50
"""How many revisions of one plan are kept; older ones are pruned."""
MAX_REVISION_BYTES = 8 * 1024 * 1024
"""How many bytes of revisions one plan keeps at most (the newest is always kept)."""
REVISIONS_DIR = ".revisions"
INDEX_NAME = "index.json"
MAX_INDEX_BYTES = 1024 * 1024

SOURCES = {
    "agent-write": "the plan agent wrote it",
    "agent-edit": "the plan agent edited it",
    "agent": "the plan agent changed it",
    "keep-planning": "reviewed; the user asked to keep planning",
    "editor": "the user edited it in $EDITOR",
    "restore": "restored after /reject",
    "found": "as planrun found it on entering plan mode (written before, or by hand)",
    "plan": "written by a plan run",
    "resume": "made again by `planrun plans resume`",
    "retry": "made again by a batch retry",
}
"""What made a revision, as the index and `planrun plans history` name it."""


@dataclass(frozen=True)
class Revision:
    """One kept text of a plan file."""

    number: int
    time: str
    """When it was kept (UTC, ISO 8601)."""
    source: str
    """What made it: a key of SOURCES."""
    size: int
    sha256: str
    again: list[str] = field(default_factory=list)
    """Later events that left this same text (a "keep planning" round, a resume or a
    retry that made the same plan), by source."""

    @property
    def file_name(self) -> str:
        return f"{self.number:04d}.md"


@dataclass(frozen=True)
class RevisionLog:
    """A plan's kept revisions, oldest first, and how many older ones were pruned."""

    directory: Path
    revisions: list[Revision]
    pruned: int = 0

    def numbered(self, number: int) -> Revision | None:
        """The revision with that number, None if it is not kept."""
        return next((rev for rev in self.revisions if rev.number == number), None)

    def text(self, revision: Revision) -> str:
        """The text of a kept revision.

        Raises:
            UnsafeFileError: its file is missing, a link, or too large.
        """
        text = read_sandbox_file(self.directory / revision.file_name, MAX_PLAN_BYTES)
        if text is None:
            raise UnsafeFileError(f"{self.directory / revision.file_name} is missing")
        return text


def revisions_dir(plan: Path) -> Path:
    """Where the revisions of the plan file PLAN are kept."""
    return plan.parent / REVISIONS_DIR / plan.stem


def load_revisions(plan: Path) -> RevisionLog:
    """The revisions kept for PLAN (none when it has no store yet).

    Raises:
        UnsafeFileError: the store is a link, or its index is unreadable.
    """
    directory = revisions_dir(plan)
    _check_directory(directory.parent)
    _check_directory(directory)
    text = read_sandbox_file(directory / INDEX_NAME, MAX_INDEX_BYTES)
    if text is None:
        return RevisionLog(directory, [])
    try:
        document = json.loads(text)
        revisions = [_revision(entry) for entry in document["revisions"]]
        pruned = int(document.get("pruned", 0))
    except (ValueError, KeyError, TypeError) as error:
        raise UnsafeFileError(f"{directory / INDEX_NAME} is malformed ({error})") from None
    return RevisionLog(directory, revisions, pruned)


def record_revision(
    plan: Path,
    text: str,
    source: str,
    *,
    keep: int = KEEP_REVISIONS,
    max_bytes: int = MAX_REVISION_BYTES,
) -> Revision | None:
    """Keep TEXT as PLAN's newest revision, made by SOURCE.

    The same text as the newest revision is not kept twice: None comes back, and unless
    the plan agent made it or it was merely found, SOURCE is noted on that revision (its
    `again` list).

    Raises:
        UnsafeFileError: a symbolic link or other non-directory stands where the store is.
        ValueError: SOURCE is not one of SOURCES.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown revision source {source!r}")
    log = load_revisions(plan)
    directory = log.directory
    _make_directory(directory.parent)
    _make_directory(directory)
    digest = hashlib.sha256(text.encode("utf-8", errors="backslashreplace")).hexdigest()
    revisions = list(log.revisions)
    if revisions and revisions[-1].sha256 == digest:
        if not source.startswith("agent") and source != "found":
            latest = revisions[-1]
            revisions[-1] = replace(latest, again=[*latest.again, source])
            _write_index(directory, revisions, log.pruned)
        return None
    number = max((rev.number for rev in revisions), default=log.pruned) + 1
    while True:
        revision = Revision(number, _now(), source, len(text.encode()), digest)
        try:
            write_new(directory / revision.file_name, text)
            break
        except FileExistsError:
            number += 1  # left by a writer that died before its index was written
    revisions.append(revision)
    kept, dropped = _bounded(revisions, keep, max_bytes)
    _write_index(directory, kept, log.pruned + len(dropped))
    for old in dropped:
        (directory / old.file_name).unlink(missing_ok=True)
    return revision


def _bounded(
    revisions: list[Revision], keep: int, max_bytes: int
) -> tuple[list[Revision], list[Revision]]:
    """The revisions to keep (the newest; at least one), and those to prune."""
    kept: list[Revision] = []
    total = 0
    for revision in reversed(revisions):
        if kept and (len(kept) >= keep or total + revision.size > max_bytes):
            break
        kept.insert(0, revision)
        total += revision.size
    return kept, revisions[: len(revisions) - len(kept)]


def _write_index(directory: Path, revisions: list[Revision], pruned: int) -> None:
    document: dict[str, Any] = {
        "version": 1,
        "pruned": pruned,
        "revisions": [asdict(revision) for revision in revisions],
    }
    replace_file(directory / INDEX_NAME, json.dumps(document, indent=1) + "\n")


def _revision(entry: dict[str, Any]) -> Revision:
    return Revision(
        number=int(entry["number"]),
        time=str(entry["time"]),
        source=str(entry["source"]),
        size=int(entry["size"]),
        sha256=str(entry["sha256"]),
        again=[str(source) for source in entry.get("again", [])],
    )


def _make_directory(directory: Path) -> None:
    with contextlib.suppress(FileExistsError):  # a link there is refused just below
        directory.mkdir(mode=0o755)
    _check_directory(directory)


def _check_directory(directory: Path) -> None:
    """Refuse a link or a file where a directory of the store should be."""
    try:
        info = directory.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFileError(f"{directory} is not a directory; planrun keeps no revisions there")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def keep_published(plan: Path, text: str, source: str) -> str:
    """Keep the text of a plan a run just published as a revision made by SOURCE; a plan
    whose store already holds revisions was made again, so "plan" becomes "resume".

    Returns:
        "" when it was kept, else why not (the plan itself is published either way).
    """
    try:
        if source == "plan" and load_revisions(plan).revisions:
            source = "resume"
        record_revision(plan, text, source)
    except (OSError, UnsafeFileError) as error:
        return f"no revision of {plan.name} was kept ({error})"
    return ""
