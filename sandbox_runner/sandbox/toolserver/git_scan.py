"""One look at everything git may read from one repository, refusing what cannot be checked."""

from __future__ import annotations

import os
import stat
import time

from .arguments import describe_os_error, file_type, is_within, printable
from .git_config import (
    INCLUDE_SECTIONS,
    git_config_variables,
    include_target,
    leads_through_proc,
    split_variable,
)

# Files of a worktree that git opens by name, and settings that name a file git opens:
# a FIFO or a device there would block git or feed it without end.
GIT_WORKTREE_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules", ".mailmap"})
GIT_PATH_SETTINGS = frozenset(
    {
        (b"core", b"excludesfile"),
        (b"core", b"attributesfile"),
        (b"mailmap", b"file"),
        (b"diff", b"orderfile"),
        (b"blame", b"ignorerevsfile"),
    }
)
GIT_CONFIG_MAX_BYTES = 1 << 20
GIT_CONFIG_MAX_FILES = 1024
GIT_INCLUDE_MAX_DEPTH = 10  # git's own limit: deeper, it stops with an error
GIT_SCAN_MAX_DEPTH = 256
# A bound on the entries (files and directories) walked, far above a monorepo's million
# files (or a git directory's loose objects): past it, git is off.
GIT_SCAN_MAX_ENTRIES = 20_000_000
GIT_MAX_REPOSITORIES = 256


GIT_RACY_NS = 100_000_000
# A ctime in whole seconds is from a filesystem that keeps no finer ones (ext4 with small
# inodes, ext3, HFS+, some network filesystems; FAT keeps two): a change anywhere in that
# tick leaves the same stamp, so such a stamp is racy for the whole tick and then some.
GIT_COARSE_RACY_NS = 2_000_000_000 + GIT_RACY_NS
# Names in a git directory that make the scan read something: a repository's files, or
# another `.git`.
GIT_DIRECTORY_NAMES = frozenset({"HEAD", ".git", "alternates", "config", "commondir"})

Stamp = tuple[int, int, int, int, int, int]
Variable = tuple[bytes, bytes | None, bytes]


class GitRefusal(Exception):
    """Something git may read cannot be checked, so git must not run; says why."""


def stamp_of(path: str) -> Stamp | None:
    try:
        return stamp_from(os.stat(path))
    except (OSError, ValueError):
        return None


def stamp_from(info: os.stat_result, now: int | None = None) -> Stamp:
    """What tells a file's versions apart. The kernel keeps times to a clock tick (up to
    10 ms): a change in the tick of a look would leave the same ctime, so a file changed
    within GIT_RACY_NS of now gets a stamp that matches none (it is looked at again);
    within GIT_COARSE_RACY_NS on a filesystem that keeps whole seconds. NOW (the clock
    before a look began, read once for its thousands of stats) may be earlier than the
    stat: it only makes more stamps racy."""
    ctime = info.st_ctime_ns
    racy = GIT_RACY_NS if ctime % 1_000_000_000 else GIT_COARSE_RACY_NS
    if ctime > (time.time_ns() if now is None else now) - racy:
        ctime = -1
    return (info.st_dev, info.st_ino, info.st_mode, info.st_size, info.st_mtime_ns, ctime)


def same(old: Stamp | None, new: Stamp | None) -> bool:
    """Whether two stamps show the same version (never one taken in a racy tick)."""
    return old == new and (old is None or old[5] != -1)


def changed(stamps: dict[str, Stamp | None]) -> bool:
    """Whether a file or directory that STAMPS hold (as os.stat sees it) changed."""
    return any(not same(stamp, stamp_of(path)) for path, stamp in stamps.items())


def blocking_kind(path: str, info: os.stat_result) -> str | None:
    """What a file is if opening or reading it could block or never end (a FIFO, a device
    other than /dev/null); None for anything git reads at once or does not read."""
    mode = info.st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISBLK(mode):
        return file_type(mode).replace("_", " ")
    if stat.S_ISCHR(mode) and os.path.realpath(path) != os.devnull:
        return "char device"
    return None


def require_unblocking(path: str, info: os.stat_result) -> None:
    kind = blocking_kind(path, info)
    if kind is not None:
        raise GitRefusal(f"{printable(path)}, which git could open, is a {kind}")


def require_stable(path: str, roots: list[str]) -> None:
    """Refuse a file that could change between this look and git's own read of it, or
    that git could see as another file."""
    if leads_through_proc(path):
        raise GitRefusal(f"{printable(path)}, which git would read, leads through /proc")
    real = os.path.realpath(path)
    if any(is_within(real, root) for root in roots):
        return
    probe = real
    while True:
        if os.path.lexists(probe) and os.access(probe, os.W_OK):
            raise GitRefusal(f"{printable(path)}, which git would read, is in a writable place")
        parent = os.path.dirname(probe)
        if parent == probe:
            return
        probe = parent


def read_git_file(path: str, stamps: dict[str, Stamp | None]) -> bytes | None:
    """A regular file's bytes, its stamp noted in STAMPS; None if it is missing,
    unreadable or a directory, as git then reads nothing there either (or stops)."""
    try:
        # O_NONBLOCK: a FIFO must not hang the server; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        stamps[path] = stamp_of(path)
        return None
    try:
        info = os.fstat(fd)
        stamps[path] = stamp_from(info)
        if stat.S_ISDIR(info.st_mode):
            return None
        if not stat.S_ISREG(info.st_mode):
            kind = file_type(info.st_mode).replace("_", " ")
            raise GitRefusal(f"{printable(path)}, which git would read, is a {kind}")
        chunks, size = [], 0
        while size <= GIT_CONFIG_MAX_BYTES and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > GIT_CONFIG_MAX_BYTES:
        raise GitRefusal(f"{printable(path)} is over {GIT_CONFIG_MAX_BYTES} bytes")
    return b"".join(chunks)


class RepositoryScan:
    """What one `.git` entry of a worktree leads git to read: the git directory (in place
    or named by a `gitdir:` file) and every file in it, the config files there (its own,
    its worktrees', its submodules'), what they include, the common directory and
    alternates they name, and files that block.

    Its stamps come in two tiers: `stamps`, of what git reads from the repository
    (configs, includes, the `.git` entry, each git directory and each directory holding a
    HEAD), few per repository and checked before every command; and `inner`, the other
    directories of the git directories, checked with the workspace's tree.
    """

    def __init__(self, dotgit: str, roots: list[str]) -> None:
        self.dotgit = dotgit
        self.roots = roots
        self.stamps: dict[str, Stamp | None] = {}
        self.inner: dict[str, Stamp | None] = {}
        self.variables: dict[Variable, None] = {}
        self.submodules: dict[bytes, None] = {}
        self.paths: dict[bytes, None] = {}  # the values of GIT_PATH_SETTINGS
        self.worktrees: dict[str, None] = {}  # where git may run: bases of those values
        self.core_worktrees: dict[str, None] = {}  # what core.worktree settings name
        self.git_dirs: set[str] = set()
        self.files: set[str] = set()  # the config files read (real paths)
        self._depths: dict[str, int] = {}  # the smallest include depth each file was read at
        self._entries = 0
        self.refusal: str | None = None

    def run(self) -> RepositoryScan:
        """Look; a refusal is kept (with the stamps so far: a change lets it go)."""
        try:
            self.dot_git(self.dotgit)
        except GitRefusal as refusal:
            self.refusal = str(refusal)
        except (OSError, ValueError, RecursionError) as error:
            self.refusal = f"the scan failed: {error!r}"
        return self

    def recheck(self) -> bool:
        """Look again at the inner directories that changed; False when the scan must be
        redone. A directory that only gained or lost regular files (loose objects, refs)
        or known directories is taken as it is now; one that went holds nothing."""
        if self.refusal is not None:  # the scan stopped short: redone when anything moved
            return not changed(self.inner)
        for directory, stamp in list(self.inner.items()):
            now = stamp_of(directory)
            if same(stamp, now):
                continue
            if now is None:
                del self.inner[directory]
                continue
            try:
                with os.scandir(directory) as scan:
                    entries = list(scan)
            except OSError:
                return False
            for entry in entries:
                if entry.name in GIT_DIRECTORY_NAMES:
                    return False
                if entry.is_file(follow_symlinks=False):
                    continue
                if not (entry.is_dir(follow_symlinks=False) and entry.path in self.inner):
                    return False
            self.inner[directory] = now
        return True

    def dot_git(self, dotgit: str) -> None:
        """A `.git` entry: a git directory, or a file naming one (`gitdir: PATH`)."""
        require_stable(dotgit, self.roots)
        self.worktrees[os.path.dirname(dotgit)] = None
        info = self.stat(dotgit, self.stamps)
        if info is None:
            return
        if stat.S_ISDIR(info.st_mode):
            self.git_dir(dotgit)
            return
        require_unblocking(dotgit, info)
        data = self.read(dotgit)
        if data is not None and data.startswith(b"gitdir: "):
            target = os.fsdecode(data[8:].rstrip(b"\r\n"))
            self.git_dir(os.path.join(os.path.dirname(dotgit), target))

    def git_dir(self, gitdir: str) -> None:
        """Every file of a git directory, including links it holds to directories: config
        files where a repository is (a HEAD), and no file that could block."""
        real = os.path.realpath(gitdir)
        if real in self.git_dirs:
            return
        self.git_dirs.add(real)
        if len(self.git_dirs) > GIT_MAX_REPOSITORIES:
            raise GitRefusal(f"over {GIT_MAX_REPOSITORIES} repositories to check")
        require_stable(gitdir, self.roots)
        pending = [(gitdir, 0)]
        while pending:
            directory, depth = pending.pop()
            entries = self.listing(directory, depth)
            names = {entry.name for entry in entries}
            if directory == gitdir or "HEAD" in names:
                self.stamps[directory] = self.inner.pop(directory, None) or stamp_of(directory)
                self.repository(directory, names)
            for entry in entries:
                if entry.name == ".git":
                    self.dot_git(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, depth + 1))
                elif entry.name == "alternates" and os.path.basename(directory) == "info":
                    self.alternates(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    self.git_file(entry, depth, pending)

    def repository(self, gitdir: str, names: set[str]) -> None:
        """The config files of the repository (or linked worktree) whose git directory
        this is, and its common directory."""
        for name in ("config", "config.worktree"):
            if name in names:
                self.config_file(os.path.join(gitdir, name), 0, gitdir)
        if "commondir" in names:
            common = self.read(os.path.join(gitdir, "commondir"))
            if common:
                self.git_dir(os.path.join(gitdir, os.fsdecode(common.rstrip(b"\r\n"))))

    def git_file(self, entry: os.DirEntry[str], depth: int, pending: list[tuple[str, int]]) -> None:
        """An entry of a git directory that is neither a directory nor a regular file."""
        if entry.is_symlink():
            info = self.stat(entry.path, self.stamps)
        else:
            info = entry.stat(follow_symlinks=False)
        if info is None:
            return
        require_unblocking(entry.path, info)
        real = os.path.realpath(entry.path)
        if stat.S_ISDIR(info.st_mode) and real not in self.git_dirs:
            # A link to a directory (git-new-workdir links objects, refs, ...): walked too.
            require_stable(real, self.roots)
            self.git_dirs.add(real)
            pending.append((entry.path, depth + 1))

    def alternates(self, path: str) -> None:
        """Object directories that objects/info/alternates names: git reads objects there."""
        objects = os.path.dirname(os.path.dirname(path))
        for line in (self.read(path) or b"").split(b"\n"):  # as git reads it: no stripping
            if line.startswith(b'"'):
                raise GitRefusal(f"{printable(path)} names a directory in C quotes")
            if line and not line.startswith(b"#"):
                self.git_dir(os.path.join(objects, os.fsdecode(line)))

    def listing(self, directory: str, depth: int) -> list[os.DirEntry[str]]:
        if depth > GIT_SCAN_MAX_DEPTH:
            raise GitRefusal(f"{printable(directory)} is over {GIT_SCAN_MAX_DEPTH} deep")
        if self.stat(directory, self.inner) is None:
            return []
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            if isinstance(exc, PermissionError) and not os.access(directory, os.X_OK):
                return []  # git cannot look inside either
            message = describe_os_error(exc, directory)
            raise GitRefusal(f"{message}, and git could look inside") from None
        self._entries += len(entries)
        if self._entries > GIT_SCAN_MAX_ENTRIES:
            raise GitRefusal(f"{printable(self.dotgit)} has over {GIT_SCAN_MAX_ENTRIES:,} entries")
        return entries

    def config_file(self, path: str, depth: int, gitdir: str) -> None:
        """Note the variables of one config file and, recursively, the files it includes.
        GITDIR is the repository's git directory, which relative settings start from."""
        real = os.path.realpath(path)
        if self._depths.get(real, GIT_INCLUDE_MAX_DEPTH + 1) <= depth:
            return
        self._depths[real] = depth
        require_stable(path, self.roots)
        data = self.read(path)
        if data is None:
            return
        self.files.add(real)
        if len(self.files) > GIT_CONFIG_MAX_FILES:
            raise GitRefusal(f"more than {GIT_CONFIG_MAX_FILES} config files to check")
        for name, value in git_config_variables(data):
            section, subsection, key = split_variable(name)
            if key == b"path" and (section, subsection is None) in INCLUDE_SECTIONS:
                target = include_target(value, path)
                if target is not None and depth < GIT_INCLUDE_MAX_DEPTH:
                    self.config_file(target, depth + 1, gitdir)
                continue
            self.variables[(section, subsection, key)] = None
            if section == b"submodule" and subsection is not None:
                self.submodules[subsection] = None
            elif (section, key) in GIT_PATH_SETTINGS and subsection is None and value:
                self.paths[value] = None
            elif (section, subsection, key) == (b"core", None, b"worktree") and value:
                self.core_worktrees[os.path.join(gitdir, os.fsdecode(value))] = None

    def stat(self, path: str, stamps: dict[str, Stamp | None]) -> os.stat_result | None:
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            stamps[path] = None
            return None
        stamps[path] = stamp_from(info)
        return info

    def read(self, path: str) -> bytes | None:
        return read_git_file(path, self.stamps)
