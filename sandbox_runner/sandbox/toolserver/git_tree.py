"""The workspace's tree as the git guard last saw it: where repositories and git's own
files are, looked at again incrementally (a listing only of directories whose ctime moved)."""

from __future__ import annotations

import os
import stat
import time

from .arguments import describe_os_error, is_within, printable
from .git_config import leads_through_proc
from .git_scan import (
    GIT_SCAN_MAX_DEPTH,
    GIT_SCAN_MAX_ENTRIES,
    GIT_WORKTREE_FILES,
    GitRefusal,
    Stamp,
    blocking_kind,
    require_stable,
    same,
    stamp_from,
    stamp_of,
)


class Directory:
    """One directory of a tree walked, as it was when last listed."""

    __slots__ = (
        "dot_git",
        "entries",
        "git_dir",
        "gitmodules",
        "links",
        "refusal",
        "stamp",
        "subdirectories",
    )

    def __init__(self, stamp: Stamp) -> None:
        self.stamp = stamp
        """Its lstat: a listing is redone when it moves (the ctime: a command can set a
        directory's mtime back, never its ctime)."""
        self.entries = 0
        self.subdirectories: list[str] = []
        self.links: list[str] = []
        self.dot_git: str | None = None
        self.git_dir: str | None = None
        """Itself, when it holds what makes a git directory (HEAD, and refs or commondir):
        `--git-dir` or GIT_DIR can name it, whatever its name."""
        self.gitmodules: str | None = None
        self.refusal: str | None = None


class Link:
    """A symbolic link in a tree walked, with what its target was when last looked at."""

    __slots__ = ("refusal", "stamp", "tree")

    def __init__(self, stamp: Stamp | None) -> None:
        self.stamp = stamp
        self.tree: str | None = None
        """The worktree elsewhere that it leads to, walked too."""
        self.refusal: str | None = None


class WorkspaceTree:
    """The trees git may run in: the roots (the workspace and the extra directories, where a
    command can `cd` as well), and worktrees elsewhere that a link in them leads to.
    Walked without following links, with os.scandir's entry types only: a stat per
    directory, none per file."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = roots
        self.directories: dict[str, Directory] = {}
        self.links: dict[str, Link] = {}
        self.tops: list[str] = []
        self.entries = 0
        self.overflowed = False
        """Past GIT_SCAN_MAX_ENTRIES: git stays off in this sandbox, no look is redone."""

    def refresh(self) -> bool:
        """Look again: one lstat per directory and a stat per link, a listing of the
        directories that changed; whether anything changed."""
        if self.overflowed:
            return False
        changed = False
        seen: set[str] = set()
        seen_links: set[str] = set()
        tops, self.tops = list(reversed(self.roots)), []
        now, known, lstat, is_dir = time.time_ns(), self.directories, os.lstat, stat.S_ISDIR
        while tops:
            top = tops.pop()
            if top in self.tops:
                continue
            self.tops.append(top)
            pending = [(top, 0)]
            while pending:
                directory, depth = pending.pop()
                try:
                    info = lstat(directory)
                except (OSError, ValueError):
                    continue
                if not is_dir(info.st_mode):
                    continue
                seen.add(directory)
                record = known.get(directory)
                stamp = stamp_from(info, now)
                if record is None or record.stamp != stamp or stamp[5] == -1:
                    record = self.look(directory, stamp, depth)
                    changed = True
                    if self.overflowed:
                        return True
                pending += [(path, depth + 1) for path in record.subdirectories]
                for path in record.links:
                    seen_links.add(path)
                    link_changed, tree = self.link(path)
                    changed |= link_changed
                    if tree is not None:
                        tops.append(tree)
        for gone in self.directories.keys() - seen:
            self.entries -= self.directories.pop(gone).entries
            changed = True
        for gone in self.links.keys() - seen_links:
            del self.links[gone]
            changed = True
        return changed

    def look(self, directory: str, stamp: Stamp, depth: int) -> Directory:
        """List DIRECTORY again: its subdirectories, links, `.git` and git's own files."""
        record = Directory(stamp)
        old = self.directories.get(directory)
        self.entries -= old.entries if old is not None else 0
        self.directories[directory] = record
        if depth > GIT_SCAN_MAX_DEPTH:
            record.refusal = f"{printable(directory)} is over {GIT_SCAN_MAX_DEPTH} deep"
            return record
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except (FileNotFoundError, NotADirectoryError):
            return record
        except OSError as exc:
            if not (isinstance(exc, PermissionError) and not os.access(directory, os.X_OK)):
                message = describe_os_error(exc, directory)
                record.refusal = f"{message}, and git could look inside"
            return record  # else git cannot look inside either
        record.entries = len(entries)
        self.entries += len(entries)
        if self.entries > GIT_SCAN_MAX_ENTRIES:
            self.overflowed = True
            return record
        head = refs = False
        for entry in entries:  # regular files, the most, are passed after one check
            name = entry.name
            if name == "HEAD":
                head = True
            elif name in ("refs", "commondir"):
                refs = True
            if name == ".git":
                record.dot_git = entry.path
            elif entry.is_file(follow_symlinks=False):
                if name == ".gitmodules":
                    record.gitmodules = entry.path
            elif entry.is_dir(follow_symlinks=False):
                record.subdirectories.append(entry.path)
            elif entry.is_symlink():
                record.links.append(entry.path)
            elif name in GIT_WORKTREE_FILES:
                record.refusal = record.refusal or self.special_file(entry)
        record.git_dir = directory if head and refs else None
        return record

    def special_file(self, entry: os.DirEntry[str]) -> str | None:
        """Why git's own file (.gitignore, ...) that is no regular file refuses git."""
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            return None
        kind = blocking_kind(entry.path, info)
        if kind is None:
            return None
        return f"{printable(entry.path)}, which git could open, is a {kind}"

    def link(self, path: str) -> tuple[bool, str | None]:
        """A link in a tree, looked at again if its target changed: (whether it did, the
        worktree elsewhere it leads to). Git enters the directory it leads to when the
        index holds a submodule at its path, so a repository there is walked too."""
        stamp = stamp_of(path)
        known = self.links.get(path)
        if known is not None and same(known.stamp, stamp):
            return False, known.tree
        record = self.links[path] = Link(stamp)
        try:
            info: os.stat_result | None = os.stat(path)
        except (OSError, ValueError):
            info = None
        if (info is None or stat.S_ISDIR(info.st_mode)) and leads_through_proc(path):
            # /proc/self/cwd and the like lead each process somewhere else.
            record.refusal = f"{printable(path)} is a link through /proc"
            return True, None
        if info is None:
            return True, None
        kind = blocking_kind(path, info) if os.path.basename(path) in GIT_WORKTREE_FILES else None
        if kind is not None:
            record.refusal = f"{printable(path)}, which git could open, is a {kind}"
        real = os.path.realpath(path)
        if not stat.S_ISDIR(info.st_mode) or any(is_within(real, root) for root in self.roots):
            return True, None  # the walk reads that directory where it is
        if os.path.lexists(os.path.join(real, ".git")):
            try:
                require_stable(real, self.roots)
            except GitRefusal as refusal:
                record.refusal = str(refusal)
                return True, None
            record.tree = real
        return True, record.tree

    def refusal(self) -> str | None:
        """Why the trees cannot be checked, if they cannot."""
        if self.overflowed:
            return f"the workspace has over {GIT_SCAN_MAX_ENTRIES:,} entries to check"
        reasons = [record.refusal for record in self.directories.values()]
        reasons += [link.refusal for link in self.links.values()]
        return next((reason for reason in reasons if reason is not None), None)

    def dot_gits(self) -> list[str]:
        """Every `.git` entry in the trees, and every directory that git could take for a
        git directory under another name."""
        found = [record.dot_git for record in self.directories.values() if record.dot_git]
        return found + [record.git_dir for record in self.directories.values() if record.git_dir]

    def gitmodules(self) -> list[str]:
        """Every `.gitmodules` file in the trees."""
        return [record.gitmodules for record in self.directories.values() if record.gitmodules]
