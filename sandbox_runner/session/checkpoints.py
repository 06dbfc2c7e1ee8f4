"""Every turn of the work session is a checkpoint: the repository is snapshotted when the
turn starts and when it ends (whatever wrote it: Edit, Write, a Bash command, a
subagent), and the files that differ are the turn's changes, which /undo takes back.

The session's first snapshot, when it starts, is the line under the user's own work:
/diff shows how the files the agent changed differ from it. Kept in the session's
directory (`checkpoints/`), with the snapshots' store (shadow_git.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandbox_runner.session.diffs import DiffLine, FileDiff, build_diff
from sandbox_runner.session.shadow_git import CheckpointError, Entry, ShadowGit, Snapshot

MAX_CHECKPOINTS = 100
"""Turns kept for /undo; older ones are forgotten."""
CHECKPOINTS_FILE = "checkpoints.json"


@dataclass
class Checkpoint:
    """One turn that changed files: the trees before and after it, and its paths."""

    turn: int
    before: str
    after: str
    paths: list[str]
    too_large: list[str] = field(default_factory=list)
    """Files it changed that were too large to keep (the turn cannot be undone)."""
    time: float = field(default_factory=time.time)


class Checkpoints:
    """The checkpoints of one session (in DIRECTORY) of one repository (WORKSPACE)."""

    def __init__(self, directory: Path, workspace: Path) -> None:
        self.directory, self.workspace = directory, workspace
        self.git = ShadowGit(directory / "git", workspace)
        self.start: str | None = None
        """The tree of the repository when the session started."""
        self.turns: list[Checkpoint] = []
        self.off: str | None = None
        """Why checkpoints are off (git failed); None while they work."""
        self._before: Snapshot | None = None
        self._load()

    def open(self) -> str | None:
        """Make the store and, for a new session, its first snapshot; a warning when
        checkpoints cannot work (the session goes on without them)."""
        try:
            self.git.init()
            if self.start is None:
                self.start = self.git.snapshot().tree
                self._save()
        except (CheckpointError, OSError) as error:
            return self._off(error)
        return None

    def begin(self) -> str | None:
        """A turn starts: the repository as it is now is what an undo goes back to. A
        warning when checkpoints stop here."""
        self._before = None
        if self.off is None and self.start is not None:
            try:
                self._before = self.git.snapshot()
            except CheckpointError as error:
                return self._off(error)
        return None

    def end(self) -> str | None:
        """The turn ended: its changes become a checkpoint. A line for the user when it
        changed files too large to keep."""
        before, self._before = self._before, None
        if before is None or self.off is not None:
            return None
        try:
            after = self.git.snapshot()
            paths = self.git.changed(before.tree, after.tree)
        except CheckpointError as error:
            return self._off(error)
        large = sorted(
            path
            for path in {*before.large, *after.large}
            if before.large.get(path) != after.large.get(path)
        )
        if not paths and not large:
            return None
        turn = self.turns[-1].turn + 1 if self.turns else 1
        self.turns = [*self.turns, Checkpoint(turn, before.tree, after.tree, paths, large)]
        self.turns = self.turns[-MAX_CHECKPOINTS:]
        self._save()
        if large:
            return (
                f"this turn changed {', '.join(large)}, over the size a checkpoint keeps; "
                "/undo cannot take this turn back"
            )
        return None

    def drop(self, count: int) -> None:
        """Forget the last COUNT checkpoints (they were undone)."""
        self.turns = self.turns[:-count] if count else self.turns
        self._save()

    def session_diffs(self, only: str | None = None) -> list[FileDiff]:
        """How the files the agent changed this session differ from the session's start
        (ONLY: that file alone)."""
        if self.start is None:
            return []
        paths = sorted({path for turn in self.turns for path in turn.paths})
        if only is not None:
            paths = [path for path in paths if path == only]
        now = self.git.snapshot().tree
        then, current = self.git.entries(self.start, paths), self.git.entries(now, paths)
        diffs = []
        for path in paths:
            old, new = then.get(path), current.get(path)
            if old != new:
                diffs.append(self.file_diff(path, old, new))
        return diffs

    def file_diff(self, path: str, old: Entry | None, new: Entry | None) -> FileDiff:
        """The diff of PATH between two of its snapshotted versions."""
        texts = [self.git.blob(entry.blob) if entry else None for entry in (old, new)]
        if any(text is not None and b"\0" in text for text in texts):
            header = (DiffLine("file", f"--- a/{path}"), DiffLine("file", f"+++ b/{path}"))
            note = DiffLine("note", "binary file changed")
            return FileDiff(path, (*header, note), 0, 0, old is None, new is None)
        decoded = [text.decode("utf-8", "replace") if text is not None else None for text in texts]
        return build_diff(path, decoded[0], decoded[1])

    def _off(self, error: Exception) -> str:
        self.off = str(error)
        return f"warning: checkpoints are off for this session (/undo cannot work): {error}"

    def _load(self) -> None:
        try:
            data = json.loads((self.directory / CHECKPOINTS_FILE).read_text())
            self.start = data["start"]
            self.turns = [Checkpoint(**turn) for turn in data["turns"]]
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, KeyError) as error:
            self._off(error)

    def _save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        data = {"start": self.start, "turns": [asdict(turn) for turn in self.turns]}
        temporary = self.directory / f".{CHECKPOINTS_FILE}.tmp"
        temporary.write_text(json.dumps(data, indent=1))
        temporary.replace(self.directory / CHECKPOINTS_FILE)
