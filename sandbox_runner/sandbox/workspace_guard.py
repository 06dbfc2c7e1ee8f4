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

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runner.protected import (
    ANYWHERE_FOLDED,
    GIT_DIRECTORY_MARKERS,
    ROOT_FOLDED,
    protected_entry,
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
    mounted: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Protected entries (and repositories) mounted read-only, with their device and
    inode: not walked. A command may rename a directory holding one (the mount moves
    with it) and put something else at its old path: the inode tells them apart."""
    mounted_inodes: dict[tuple[int, int], str] = field(default_factory=dict)


class WorkspaceGuard:
    """Watches one workspace for the sandboxes that write it (a session's work sandbox
    and its general-purpose subagents share one)."""

    def __init__(self, workspace: Path, quarantine: Path) -> None:
        self.workspace = workspace
        self.quarantine = quarantine
        self._root = str(workspace)
        self._lock = threading.Lock()
        self._moved = 0
        self._in_flight = 0
        self.state = GuardState()
        self._scan(adopt=True)
        for path in list(self.state.tracked):
            if not (workspace / path).is_symlink():
                del self.state.tracked[path]
                inode = _inode(self._host(path))
                self.state.mounted[path] = inode
                self.state.mounted_inodes[inode] = path

    def read_only_paths(self) -> list[str]:
        """Protected entries and repositories that exist: the work sandbox mounts them
        read-only (relative paths; no link among them)."""
        return sorted(self.state.mounted)

    def adopt(self) -> list[Finding]:
        """Before a tool call: protected entries that appeared since the last look came
        from the host (the user), and are watched from now on, not removed. Unless
        another call is under way (a subagent's command): then they may be its work, and
        are moved out."""
        with self._lock:
            return self._scan(adopt=self._in_flight == 0)

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Around a call that may write: counted, so that no look adopts its work."""
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def written(self, relative: str) -> None:
        """planrun wrote RELATIVE on the host after the user approved it: what holds it is
        watched from now on, not moved out."""
        entry = protected_entry(relative)
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
            info = os.lstat(host)
            if info.st_mode & 0o500 != 0o500:
                os.chmod(host, stat.S_IMODE(info.st_mode) | 0o500)  # see _listed
                info = os.lstat(host)
        except OSError:
            return []
        ctime = info.st_ctime_ns
        known = self.state.directories.get(relative)
        if known is None or known.ctime != ctime:
            entries = _listed(host)
            if entries is None:
                # Not even its owner may list it (a command's chmod): out it goes whole.
                if relative:
                    findings.append(self._move(relative, "planrun could not look into it"))
                return []
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
        names = ROOT_FOLDED | ANYWHERE_FOLDED if relative == "" else ANYWHERE_FOLDED
        for name in entries:
            path = _join(relative, name)
            if name.casefold() in names and not self._known(path):
                findings.append(self._found(path, adopt))
        became_repository = _is_git_directory(entries) and not (old and _is_git_directory(old))
        if relative and became_repository and relative not in state.tracked:
            if adopt:
                state.tracked[relative] = self._identity(relative)
                findings.append(Finding(relative, GIT_REASON, None))
            else:
                findings.append(self._move(_join(relative, "HEAD"), GIT_REASON))

    def _known(self, path: str) -> bool:
        """Whether PATH is a mounted or watched protected entry (a mounted one moved with
        its directory is followed to its new path)."""
        state = self.state
        if path in state.tracked:
            return True
        inode = _inode(self._host(path))
        if path in state.mounted:
            if state.mounted[path] == inode:
                return True
            del state.mounted[path]  # moved away, and something else put in its place
        moved_from = state.mounted_inodes.get(inode)
        if moved_from is not None and inode != (0, 0):
            state.mounted.pop(moved_from, None)
            state.mounted[path] = inode
            state.mounted_inodes[inode] = path
            return True
        return False

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


def _inode(path: str) -> tuple[int, int]:
    try:
        info = os.lstat(path)
    except OSError:
        return (0, 0)
    return (info.st_dev, info.st_ino)


def _entries(directory: str | Path) -> dict[str, bool]:
    return _listed(directory) or {}


def _listed(directory: str | Path) -> dict[str, bool] | None:
    """The entries of a directory; its owner's read and search bits are given back first
    (a command may take them away to hide what it planted). None if it still cannot be
    listed."""
    for attempt in (1, 2):
        try:
            with os.scandir(directory) as listing:
                return {entry.name: entry.is_dir(follow_symlinks=False) for entry in listing}
        except FileNotFoundError:
            return {}
        except OSError:
            if attempt == 2:
                return None
            with contextlib.suppress(OSError):
                os.chmod(directory, stat.S_IMODE(os.lstat(directory).st_mode) | 0o500)
    return None


def _is_git_directory(entries: dict[str, bool]) -> bool:
    """HEAD beside objects and refs, or beside commondir, whatever their types: git
    follows links to them."""
    head, objects, refs = GIT_DIRECTORY_MARKERS
    if head not in entries:
        return False
    return "commondir" in entries or (objects in entries and refs in entries)


def _join(relative: str, name: str) -> str:
    return f"{relative}/{name}" if relative else name


def _move_out(source: Path, target: Path) -> None:
    """Rename SOURCE to TARGET; across file systems, copy what can be copied (files,
    directories, links: never a FIFO, which would block) and remove the original. The
    owner's permissions are given back first to the directories a move needs (a command
    may take them away so that what it planted cannot be taken out)."""
    _give_back(source.parent)
    try:
        os.rename(source, target)
        return
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
    info = os.lstat(source)
    if stat.S_ISDIR(info.st_mode):
        directories = [str(source)]
        while directories:
            directory = directories.pop()
            _give_back(directory)
            directories += [path for path, is_dir in _entries_of(directory) if is_dir]
        shutil.copytree(source, target, symlinks=True, ignore=_special_files)
        shutil.rmtree(source)
    else:
        if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            shutil.copy2(source, target, follow_symlinks=False)
        os.unlink(source)


def _give_back(directory: str | Path) -> None:
    """Give DIRECTORY its owner's read, write and search bits, if a command took them."""
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(os.lstat(directory).st_mode)
        if mode & 0o700 != 0o700:
            os.chmod(directory, mode | 0o700)


def _entries_of(directory: str) -> list[tuple[str, bool]]:
    """The paths in DIRECTORY, each with whether it is a directory (links not followed)."""
    return [(f"{directory}/{name}", is_dir) for name, is_dir in _entries(directory).items()]


def _special_files(directory: str, names: list[str]) -> list[str]:
    special = []
    for name in names:
        mode = os.lstat(os.path.join(directory, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            special.append(name)
    return special
