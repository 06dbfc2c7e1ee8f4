"""A repository shipped to Ray nodes that share no disk: a deterministic gzip tarball (the
same tree gives the same digest, so a node's cache hits across runs) of what repo_files
lets travel, bounded by the bytes it extracts to as it is written; and its extraction
into a node's cache (bounded the same way; links kept as the local engine mounts them,
nothing else that is not a file or a directory), read-only, pruned to the newest few."""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import io
import os
import stat
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sandbox_runner.batch.shipping.repo_files import Shipped, shipped_files
from sandbox_runner.errors import ConfigError

MAX_REPO_BYTES = 512 * 1024 * 1024
"""The most a shipped repository's files may add up to, extracted (and its tarball,
compressed: Ray's own limit for a single object sent in a task, its GRPC message size)."""
KEPT_REPOSITORIES = 8
"""A node keeps the most recently used copies; older ones are removed."""
STALE_STAGING_SECONDS = 3600.0
MARKER = ".planrun-digest"
IN_USE = ".in-use"
"""Held (shared) by every job that reads a copy: `<digest>.in-use` beside it."""
_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


class _Bounded(io.RawIOBase):
    """A sink that refuses to grow past a limit (the tarball is never held whole first)."""

    def __init__(self, limit: int, workspace: Path) -> None:
        self.buffer, self.limit, self.workspace = io.BytesIO(), limit, workspace

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self.buffer.tell() + len(data) > self.limit:
            raise ConfigError(
                f"the tarball of {self.workspace} is over {_size(self.limit)} even compressed, "
                "Ray's limit for one object, which no setting raises: move files out of the "
                "repository or list them in .gitignore"
            )
        return self.buffer.write(data)


class _Packer:
    """Adds shipped paths to a tarball, counting the bytes they will extract to."""

    def __init__(self, archive: tarfile.TarFile, workspace: Path, limit: int) -> None:
        self.archive, self.workspace, self.limit = archive, workspace, limit
        self.extracted = 0

    def add(self, shipped: Shipped) -> None:
        name = f"./{shipped.name}" if shipped.name else "."
        if shipped.text is not None:
            data = shipped.text.encode("utf-8", "surrogateescape")
            self._count(len(data))
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            self.archive.addfile(info, io.BytesIO(data))
            return
        found = os.lstat(shipped.path)
        if stat.S_ISREG(found.st_mode):
            self._add_file(name, shipped.path)
            return
        info = _info(name, found)
        if stat.S_ISLNK(found.st_mode):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(shipped.path)
        elif stat.S_ISDIR(found.st_mode):
            info.type = tarfile.DIRTYPE
        else:
            return  # it became a FIFO, a device or a socket meanwhile
        self.archive.addfile(info)

    def _add_file(self, name: str, path: Path) -> None:
        # Opened without following a link or blocking on a FIFO that took the file's place;
        # a second name of a file travels as a file of its own (a copy reads the same).
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        with os.fdopen(os.open(path, flags), "rb") as handle:
            found = os.fstat(handle.fileno())
            if not stat.S_ISREG(found.st_mode):
                return
            self._count(found.st_size)
            info = _info(name, found)
            info.size = found.st_size
            self.archive.addfile(info, handle)

    def _count(self, size: int) -> None:
        self.extracted += size
        if self.extracted > self.limit:
            raise ConfigError(
                f"{self.workspace} holds over {_size(self.limit)} of files to ship to "
                "the Ray nodes (counted as extracted), planrun's cap for a repository, which "
                "no setting raises: move large untracked files out of it or list them in "
                ".gitignore"
            )


def _size(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"


def _info(name: str, found: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = stat.S_IMODE(found.st_mode), int(found.st_mtime)
    return info  # owned by root (uid and gid 0, no names): the same bytes on any machine


def repo_tarball(workspace: Path, exclude: Path | None, limit: int = MAX_REPO_BYTES) -> bytes:
    """The workspace as repo_files lets it travel, .git included (an allow-list of it, its
    config files rebuilt from safe keys), as a gzip tarball whose bytes depend on the tree
    alone. exclude (the run's output directory) stays behind.

    Raises:
        ConfigError: its files add up to more than limit, or one cannot be read.
    """
    sink = _Bounded(limit, workspace)
    try:
        with (
            gzip.GzipFile(fileobj=sink, mode="wb", compresslevel=1, mtime=0) as compressed,
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
        ):
            packer = _Packer(archive, workspace, limit)
            for shipped in shipped_files(workspace, exclude):
                packer.add(shipped)
    except OSError as error:
        raise ConfigError(f"cannot pack {workspace} for the Ray nodes: {error}") from None
    return sink.buffer.getvalue()


def extract(blob: bytes, target: Path, digest: str, limit: int = MAX_REPO_BYTES) -> None:
    """Extract a shipped repository into target (a new directory), read-only; nothing is
    written when a member is unsafe or the files would add up to more than limit.

    Raises:
        ConfigError: it does not match its digest, is too large, or cannot be extracted.
    """
    if hashlib.sha256(blob).hexdigest() != digest:
        raise ConfigError("the shipped repository does not match its digest")
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
            members = _checked_members(archive, limit)
            archive.extractall(target, members=members, filter="fully_trusted")
    except (OSError, tarfile.TarError) as error:
        raise ConfigError(f"cannot extract the shipped repository: {error}") from None
    _read_only(target)


def _checked_members(archive: tarfile.TarFile, limit: int) -> list[tarfile.TarInfo]:
    """The members as tarfile's data filter passes them (no device, FIFO or hard link; no
    set-id bits or writing for others; no owner), read (headers only) before anything is
    written, except that a symbolic link is kept wherever it points: the sandbox mounts
    the copy read-only and its tools read beneath the workspace only, as they do with the
    repository the local engine mounts. That filter resolves each member's path on disk,
    which is quadratic in a tree's depth; here no member may lie outside the copy or
    beneath a link because each one's directory is a directory member before it, and
    no name comes twice.

    Raises:
        ConfigError: a member is unsafe, or the files add up to more than limit.
    """
    members, directories, names, extracted = [], {"."}, set(), 0
    for member in archive:
        name = os.path.normpath(member.name)
        parent = os.path.dirname(name) or "."
        outside = name == ".." or name.startswith("../") or os.path.isabs(name)
        if outside or name in names or (name != "." and parent not in directories):
            raise ConfigError(f"the shipped repository holds an unsafe member {name!r}")
        names.add(name)
        mode = member.mode & 0o755 | 0o700  # a link's mode is never applied
        if member.isdir():
            directories.add(name)
        elif member.isreg():
            extracted += member.size
            mode = member.mode & (0o755 if member.mode & 0o100 else 0o644) | 0o600
        elif not member.issym():
            raise ConfigError(f"the shipped repository holds {name!r}, not a file or a link")
        if extracted > limit:
            raise ConfigError(
                f"the shipped repository extracts to over {_size(limit)}, planrun's cap "
                "for a repository on a node (no setting raises it)"
            )
        members.append(member.replace(mode=mode, uid=0, gid=0, uname="", gname="", deep=False))
    return members


def _read_only(root: Path) -> None:
    for directory in _directories(root):
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    os.chmod(entry.path, entry.stat(follow_symlinks=False).st_mode & ~_WRITE_BITS)
        os.chmod(directory, 0o555)


def _directories(root: Path) -> Iterator[str]:
    """root and every directory beneath it (never through a link), each before those it
    holds, from a stack of its own: no depth exhausts Python's recursion limit (os.walk and
    shutil.rmtree recurse on Python 3.11). A directory is listed once the caller is done
    with it (made it readable, say). Paths stay strings: parsing a deep one is slow."""
    stack = [str(root)]
    while stack:
        directory = stack.pop()
        yield directory
        with os.scandir(directory) as entries:
            stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))


@contextlib.contextmanager
def node_copy(cache: Path, digest: str, fetch: Callable[[], bytes]) -> Iterator[Path]:
    """This node's copy of a shipped repository, in use until the block ends (a copy in use
    is never pruned): extracted once (under a lock), repaired when damaged, the cache
    pruned to the most recently used copies.

    Raises:
        ConfigError: the shipped bytes are wrong or cannot be extracted.
    """
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / digest
    with _in_use(cache / f"{digest}{IN_USE}"):
        with (cache / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            marker = target / MARKER
            if target.is_dir() and marker.is_file() and marker.read_text() == digest:
                os.utime(marker)  # most recently used
            else:
                _remove(target)
                staging = Path(tempfile.mkdtemp(prefix=f"{digest}.", dir=cache))
                try:
                    extract(fetch(), staging / "repo", digest)
                    (staging / MARKER).write_text(digest)
                    os.replace(staging, target)
                finally:
                    _remove(staging)
            _prune(cache, keep=target)
        yield target / "repo"


@contextlib.contextmanager
def _in_use(path: Path) -> Iterator[None]:
    """A shared hold on a copy's in-use file; the pruner removes a copy (and that file)
    only under an exclusive one, so a hold on a file it unlinked meanwhile is taken again."""
    while True:
        with path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            try:
                held = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                held = False
            if held:
                yield
                return


def _prune(cache: Path, keep: Path) -> None:
    now = time.time()
    copies = []
    for entry in cache.iterdir():
        marker = entry / MARKER
        if entry == keep or not entry.is_dir():
            continue
        if marker.is_file():
            copies.append((marker.stat().st_mtime, entry))
        elif now - entry.stat().st_mtime > STALE_STAGING_SECONDS:
            _remove(entry)  # staging left by a worker that died mid-extraction
    for _, entry in sorted(copies, reverse=True)[KEPT_REPOSITORIES - 1 :]:
        _remove_unused(entry, entry.with_name(entry.name + IN_USE))
    for in_use in cache.glob(f"*{IN_USE}"):
        entry = in_use.with_name(in_use.name.removesuffix(IN_USE))
        if not entry.exists():
            _remove_unused(entry, in_use)  # of a copy that failed to extract


def _remove_unused(entry: Path, in_use: Path) -> None:
    """Remove a copy unless a job holds it (its jobs read it through their sandbox's mount)."""
    with in_use.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        _remove(entry)
        in_use.unlink()


def _remove(path: Path) -> None:
    """Remove a (read-only) directory tree, if it is there; what cannot be removed stays."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        with contextlib.suppress(OSError):
            path.unlink()
        return
    if not path.exists():
        return
    directories = []
    with contextlib.suppress(OSError):
        for directory in _directories(path):
            with contextlib.suppress(OSError):
                os.chmod(directory, 0o755)
            directories.append(directory)
    for directory in reversed(directories):  # those it holds before each directory
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        with contextlib.suppress(OSError):
            os.rmdir(directory)
