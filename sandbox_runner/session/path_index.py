"""The repository's paths that `@` completes: a bounded walk, cached for the session and
refreshed in the background when it is old.

git is never run on the host (a repository's config can name programs for it to run):
what git ignores is read from the `.gitignore` files and the index, as a batch ships a
repository. The walk never enters `.git`, a link, or an ignored or bulky directory
(`node_modules`, `.venv`, ...) that git does not track, and stops at MAX_SCANNED entries
or WALK_SECONDS, whichever comes first.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Loaded by the walk, in its thread: the prompt is drawn without them.
    from sandbox_runner.git_ignore import IgnoreRules
    from sandbox_runner.git_index import Tracked

MAX_SCANNED = 100_000
"""Directory entries looked at per walk, at most: a huge tree is cut, never walked whole."""
MAX_PATHS = 50_000
"""Paths kept for completion, at most."""
WALK_SECONDS = 1.0
"""How long one walk may take."""
FRESH_SECONDS = 20.0
"""How old a walk may be before a completion asks for a new one (in the background)."""
BULKY = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
        ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".cache", ".gradle", ".next",
        ".terraform", "bower_components",
    }
)  # fmt: skip
"""Directories never entered unless git tracks something in them."""


@dataclass(frozen=True)
class RepoPaths:
    """One walk's result: paths relative to the repository, `/`-separated, a directory's
    with a trailing `/`; and whether the walk saw the whole tree."""

    paths: tuple[str, ...]
    complete: bool


def walk_repository(
    root: Path,
    *,
    max_scanned: int = MAX_SCANNED,
    max_paths: int = MAX_PATHS,
    seconds: float = WALK_SECONDS,
) -> RepoPaths:
    """The paths beneath ROOT that `@` offers, breadth first (shallow paths first, so a
    cut walk keeps what is near the top)."""
    tracked, rules = _git_view(root)
    deadline = time.monotonic() + seconds
    found: list[str] = []
    scanned = 0
    queue: deque[tuple[str, IgnoreRules | None]] = deque([("", rules)])
    while queue:
        prefix, directory_rules = queue.popleft()
        here = directory_rules
        if here is not None:
            here = here.with_file(root / prefix / ".gitignore", prefix)
        listed = _entries(root / prefix if prefix else root, max_scanned - scanned + 1)
        for name, is_dir in listed:
            scanned += 1
            if scanned > max_scanned or len(found) >= max_paths or time.monotonic() > deadline:
                return RepoPaths(tuple(found), False)
            relative = prefix + name
            if _skipped(relative, name, is_dir, tracked, here):
                continue
            found.append(relative + "/" if is_dir else relative)
            if is_dir:
                queue.append((relative + "/", here))
    return RepoPaths(tuple(found), True)


def _entries(directory: Path, limit: int) -> list[tuple[str, bool]]:
    """The names in DIRECTORY (the first LIMIT the system lists: a directory of millions is
    not read whole), sorted, each with whether it is a directory (a link is not: it is
    offered, never followed). A name that would not print as itself is left out."""
    try:
        with os.scandir(directory) as scan:
            entries: list[tuple[str, bool]] = []
            for entry in scan:
                if len(entries) >= limit:
                    break
                if not entry.name.isprintable():
                    continue
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                    entries.append((entry.name, stat.S_ISDIR(mode)))
    except OSError:
        return []
    return sorted(entries)


def _git_view(root: Path) -> tuple[Tracked | None, IgnoreRules | None]:
    """What git tracks in ROOT and its ignore rules (None, None outside a repository)."""
    from sandbox_runner.errors import ConfigError
    from sandbox_runner.git_ignore import IgnoreRules, excludes_file
    from sandbox_runner.git_index import checkout_of

    try:
        checkout = checkout_of(root) if os.path.lexists(root / ".git") else None
    except ConfigError:
        checkout = None
    if checkout is None:
        return None, None
    rules = IgnoreRules().with_file(excludes_file(checkout.common_dir / "config"))
    return checkout.tracked, rules.with_file(checkout.common_dir / "info" / "exclude")


def _skipped(
    relative: str, name: str, is_dir: bool, tracked: Tracked | None, rules: IgnoreRules | None
) -> bool:
    if name == ".git":
        return True
    if tracked is not None and tracked.holds(relative):
        return False
    if is_dir and name in BULKY:
        return True
    return rules is not None and rules.ignored(relative, is_dir)


class PathIndex:
    """The paths of one repository for `@` completion: walked on first use (or ahead, with
    warm), then served from the cache; an old cache is served while a new walk runs."""

    def __init__(
        self,
        root: Path,
        fresh_seconds: float = FRESH_SECONDS,
        walk: Callable[[Path], RepoPaths] = walk_repository,
    ) -> None:
        self.root = root
        self.fresh_seconds = fresh_seconds
        self.walk = walk
        self._lock = threading.Lock()
        self._walked: RepoPaths | None = None
        self._walked_at = 0.0
        self._walking: threading.Thread | None = None

    def warm(self) -> None:
        """Start a walk in the background (the session start calls it)."""
        with self._lock:
            self._start_walk()

    def paths(self) -> RepoPaths:
        """The paths: the cached walk (a walk under way is waited for the first time)."""
        with self._lock:
            walking, walked = self._walking, self._walked
            if walked is None and walking is None:
                walking = self._start_walk()
            elif walked is not None and time.monotonic() - self._walked_at > self.fresh_seconds:
                self._start_walk()
        if walked is None and walking is not None:
            walking.join(WALK_SECONDS * 2)
        return self._walked or RepoPaths((), False)

    def directory(self, relative: str, limit: int = 1000) -> list[str]:
        """The paths in one directory of the repository, listed now: what a cut walk did
        not reach (RELATIVE is `a/b` or ""; a link or `..` on the way lists nothing)."""
        parts = [part for part in relative.split("/") if part]
        if ".." in parts or ".git" in parts:
            return []
        directory = self.root
        for part in parts:
            directory = directory / part
            if directory.is_symlink() or not directory.is_dir():
                return []
        prefix = "/".join(parts) + "/" if parts else ""
        return [
            prefix + name + ("/" if is_dir else "")
            for name, is_dir in _entries(directory, limit)
            if name != ".git"
        ]

    def _start_walk(self) -> threading.Thread | None:
        if self._walking is not None:
            return self._walking
        thread = threading.Thread(target=self._walk, name="path-index", daemon=True)
        self._walking = thread
        thread.start()
        return thread

    def _walk(self) -> None:
        try:
            walked = self.walk(self.root)
        except OSError:
            walked = RepoPaths((), False)
        with self._lock:
            self._walked, self._walked_at, self._walking = walked, time.monotonic(), None
