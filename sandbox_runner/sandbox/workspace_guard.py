"""The host's watch over a writable workspace: what the read-only mounts cannot cover.

A work sandbox's protected entries that exist are mounted read-only (the kernel refuses
every write). What does not exist yet cannot be mounted over without planting it in the
user's repository, so the host looks after every tool call: a protected name that
appeared, a tracked one that changed, or a directory that became a git repository (HEAD
beside objects/ and refs/: host git would use it) is moved out of the repository into
the session's quarantine, and the user and the model are told.

The look is incremental: one stat per directory, and a listing only of directories whose
ctime moved (a command can set a directory's mtime back, never its ctime).
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runner.protected import (
    ANYWHERE_NAMES,
    GIT_DIRECTORY_MARKERS,
    ROOT_NAMES,
    protected_reason,
)

GIT_REASON = "host git would take its directory for a repository"


@dataclass(frozen=True)
class Finding:
    """Something the sandbox wrote that host tools would run or agents obey."""

    path: str
    """Relative to the workspace."""
    reason: str
    moved_to: Path | None
    """Where it is now (None: it could not be moved, or was only adopted)."""

    def describe(self) -> str:
        where = f"moved to {self.moved_to}" if self.moved_to else "left in place"
        return f"{self.path} ({self.reason}): {where}"


@dataclass
class _Directory:
    ctime: int
    entries: dict[str, bool]
    """Name -> whether it is a directory (not following links)."""
    subdirectories: list[str]
    """Relative paths of the directories in it."""


@dataclass
class GuardState:
    directories: dict[str, _Directory] = field(default_factory=dict)
    tracked: dict[str, str] = field(default_factory=dict)
    """Protected entries no mount covers (links, and ones that appeared from the host)."""
    mounted: set[str] = field(default_factory=set)
    """Protected entries (and repositories) mounted read-only: not walked."""


class WorkspaceGuard:
    """Watches one workspace for the sandboxes that write it (a session's work sandbox
    and its general-purpose subagents share one)."""

    def __init__(self, workspace: Path, quarantine: Path) -> None:
        self.workspace = workspace
        self.quarantine = quarantine
        self._root = str(workspace)
        self._lock = threading.Lock()
        self._moved = 0
        self.state = GuardState()
        self._scan(adopt=True)
        self.state.mounted = {
            path for path in self.state.tracked if not (workspace / path).is_symlink()
        }
        for path in self.state.mounted:
            del self.state.tracked[path]

    def read_only_paths(self) -> list[str]:
        """Protected entries and repositories that exist: the work sandbox mounts them
        read-only (relative paths; no link among them)."""
        return sorted(self.state.mounted)

    def adopt(self) -> list[Finding]:
        """Before a tool call: protected entries that appeared since the last look came
        from the host (the user), and are watched from now on, not removed."""
        with self._lock:
            return self._scan(adopt=True)

    def written(self, relative: str) -> None:
        """planrun wrote RELATIVE on the host after the user approved it: what holds it is
        watched from now on, not moved out."""
        parts = relative.split("/")
        entry = parts[0]
        if entry not in ROOT_NAMES:
            depth = next(i for i, part in enumerate(parts) if part in ANYWHERE_NAMES)
            entry = "/".join(parts[: depth + 1])
        with self._lock:
            if entry not in self.state.mounted:
                self.state.tracked[entry] = self._identity(entry)
            self._scan(adopt=True)

    def check(self) -> list[Finding]:
        """After a tool call: move out what it planted."""
        with self._lock:
            return self._scan(adopt=False)

    # ------------------------------------------------------------------ the walk

    def _scan(self, *, adopt: bool) -> list[Finding]:
        findings: list[Finding] = []
        for path, identity in list(self.state.tracked.items()):
            now = self._identity(path)
            if now != identity:
                findings.append(self._found(path, adopt, now))
        pending = [""]
        seen: set[str] = set()
        while pending:
            relative = pending.pop()
            seen.add(relative)
            for child in self._look(relative, adopt, findings):
                pending.append(child)
        for gone in set(self.state.directories) - seen:
            del self.state.directories[gone]
        return findings

    def _look(self, relative: str, adopt: bool, findings: list[Finding]) -> list[str]:
        """Refresh one directory; return its subdirectories to walk."""
        host = self._host(relative)
        try:
            ctime = os.lstat(host).st_ctime_ns
        except OSError:
            return []
        known = self.state.directories.get(relative)
        if known is None or known.ctime != ctime:
            entries = _entries(host)
            old = known.entries if known is not None else None
            children = [_join(relative, name) for name, is_dir in entries.items() if is_dir]
            self.state.directories[relative] = _Directory(ctime, entries, children)
            self._judge(relative, entries, old, adopt, findings)
        skip = self.state.mounted
        tracked = self.state.tracked
        children = self.state.directories[relative].subdirectories
        if not skip and not tracked:
            return children
        return [child for child in children if child not in skip and child not in tracked]

    def _judge(
        self,
        relative: str,
        entries: dict[str, bool],
        old: dict[str, bool] | None,
        adopt: bool,
        findings: list[Finding],
    ) -> None:
        state = self.state
        names = ROOT_NAMES | ANYWHERE_NAMES if relative == "" else ANYWHERE_NAMES
        for name in entries:
            path = _join(relative, name)
            if name in names and path not in state.mounted and path not in state.tracked:
                findings.append(self._found(path, adopt))
        became_repository = _is_git_directory(entries) and not (old and _is_git_directory(old))
        if relative and became_repository and relative not in state.tracked:
            if adopt:
                state.tracked[relative] = self._identity(relative)
                findings.append(Finding(relative, GIT_REASON, None))
            else:
                findings.append(self._move(_join(relative, "HEAD"), GIT_REASON))

    def _found(self, path: str, adopt: bool, identity: str | None = None) -> Finding:
        reason = protected_reason(path) or GIT_REASON
        if adopt:
            self.state.tracked[path] = identity or self._identity(path)
            return Finding(path, reason, None)
        return self._move(path, reason)

    def _move(self, path: str, reason: str) -> Finding:
        self._moved += 1
        target = self.quarantine / str(self._moved) / path
        self.state.tracked.pop(path, None)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _move_out(Path(self._host(path)), target)
        except OSError:
            return Finding(path, reason, None)
        return Finding(path, reason, target)

    def _identity(self, path: str) -> str:
        """A fingerprint of the entry and, for a directory, of everything below it."""
        digest = hashlib.sha256()
        pending = [Path(self._host(path))]
        while pending:
            current = pending.pop()
            try:
                info = os.lstat(current)
            except OSError:
                digest.update(f"{current}:gone".encode())
                continue
            stamp = (info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            digest.update(f"{current}:{stamp}".encode(errors="surrogateescape"))
            if stat.S_ISDIR(info.st_mode):
                pending.extend(sorted(current / name for name in _entries(current)))
        return digest.hexdigest()

    def _host(self, relative: str) -> str:
        # Strings, not Paths: a look at a big tree makes one per directory.
        return f"{self._root}/{relative}" if relative else self._root


def _entries(directory: str | Path) -> dict[str, bool]:
    try:
        with os.scandir(directory) as listing:
            return {entry.name: entry.is_dir(follow_symlinks=False) for entry in listing}
    except OSError:
        return {}


def _is_git_directory(entries: dict[str, bool]) -> bool:
    head, objects, refs = GIT_DIRECTORY_MARKERS
    if head not in entries or entries[head]:
        return False
    return "commondir" in entries or (entries.get(objects, False) and entries.get(refs, False))


def _join(relative: str, name: str) -> str:
    return f"{relative}/{name}" if relative else name


def _move_out(source: Path, target: Path) -> None:
    """Rename SOURCE to TARGET; across file systems, copy what can be copied (files,
    directories, links: never a FIFO, which would block) and remove the original."""
    try:
        os.rename(source, target)
        return
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
    info = os.lstat(source)
    if stat.S_ISDIR(info.st_mode):
        shutil.copytree(source, target, symlinks=True, ignore=_special_files)
        shutil.rmtree(source)
    else:
        if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            shutil.copy2(source, target, follow_symlinks=False)
        os.unlink(source)


def _special_files(directory: str, names: list[str]) -> list[str]:
    special = []
    for name in names:
        mode = os.lstat(os.path.join(directory, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            special.append(name)
    return special
