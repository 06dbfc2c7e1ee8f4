"""A repository shipped to Ray nodes that share no disk: a deterministic gzip tarball (the
same tree gives the same digest, so a node's cache hits across runs), bounded as it is
written, without credentials from `.git/config`; and its extraction into a node's cache
(links kept as the local engine mounts them, nothing else that is not a file or a
directory), read-only, pruned to the newest few."""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import io
import os
import re
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sandbox_runner.errors import ConfigError

MAX_REPO_BYTES = 512 * 1024 * 1024
"""Ray's own limit for a single object sent in a task (GRPC message size)."""
KEPT_REPOSITORIES = 8
"""A node keeps the most recently used copies; older ones are removed."""
STALE_STAGING_SECONDS = 3600.0
MARKER = ".planrun-digest"
IN_USE = ".in-use"
"""Held (shared) by every job that reads a copy: `<digest>.in-use` beside it."""
GIT_CONFIG = "./.git/config"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")


class _Bounded(io.RawIOBase):
    """A sink that refuses to grow past a limit (the tarball is never held whole first)."""

    def __init__(self, limit: int, workspace: Path) -> None:
        self.buffer, self.limit, self.workspace = io.BytesIO(), limit, workspace

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self.buffer.tell() + len(data) > self.limit:
            raise ConfigError(
                f"{self.workspace} is over {self.limit // 2**20} MB as a tarball; Ray ships at "
                "most 512 MB (move large untracked files out of the repository)"
            )
        return self.buffer.write(data)


def repo_tarball(workspace: Path, exclude: Path | None, limit: int = MAX_REPO_BYTES) -> bytes:
    """The workspace as `planrun plan --repo` sees it, .git included (its config without
    credentials), as a gzip tarball whose bytes depend on the tree alone.

    Raises:
        ConfigError: it is too large, or a file of it cannot be read.
    """
    sink = _Bounded(limit, workspace)

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        # Compared without resolving: the workspace and --out are resolved already.
        if exclude is not None and (workspace / info.name).is_relative_to(exclude):
            return None
        if info.islnk():
            # A second name of a file travels as a file of its own (a copy reads the same);
            # a second name of a FIFO or a device stays behind with the first.
            found = (workspace / info.name).lstat()
            if not stat.S_ISREG(found.st_mode):
                return None
            info.type, info.linkname, info.size = tarfile.REGTYPE, "", found.st_size
        if not (info.isfile() or info.isdir() or info.issym()):
            return None  # FIFOs, devices, sockets: the local engine's tools skip them too
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    try:
        with (
            gzip.GzipFile(fileobj=sink, mode="wb", compresslevel=1, mtime=0) as compressed,
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
        ):
            archive.add(workspace, arcname=".", filter=_without(GIT_CONFIG, keep))
            config = workspace / ".git" / "config"
            if config.is_file() and not config.is_symlink():
                _add_text(
                    archive, GIT_CONFIG, sanitised_git_config(config.read_text("utf-8", "replace"))
                )
    except (OSError, RuntimeError) as error:
        raise ConfigError(f"cannot pack {workspace} for the Ray nodes: {error}") from None
    return sink.buffer.getvalue()


def _without(
    name: str, keep: Callable[[tarfile.TarInfo], tarfile.TarInfo | None]
) -> Callable[[tarfile.TarInfo], tarfile.TarInfo | None]:
    def filtered(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if info.name == name else keep(info)

    return filtered


def _add_text(archive: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode("utf-8")
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    archive.addfile(info, io.BytesIO(data))


def sanitised_git_config(text: str) -> str:
    """A repository's git config without what could carry a credential: `[credential]`
    sections, `extraheader` keys (actions/checkout puts a token there), and the user
    information in URLs; as git reads it (a key on its section's line, a value continued
    over lines with a trailing backslash)."""
    lines: list[str] = []
    in_credential = continued = dropping = False
    for line in text.splitlines():
        if continued:  # the rest of the value above: kept or dropped with it
            continued = _continues(line)
            if not dropping:
                lines.append(line)
            continue
        rest = line.strip()
        if rest.startswith("["):
            header, rest = _split_header(rest)
            in_credential = header[1:].lstrip().lower().startswith("credential")
            if not in_credential:
                lines.append(header)
            if not rest:
                continue
            line = rest
        if rest.startswith(("#", ";")):
            lines.append(line)
            continue
        key = rest.split("=", 1)[0].strip().lower()
        dropping = in_credential or key == "extraheader"
        continued = _continues(rest)
        if not dropping:
            lines.append(line)
    return "".join(_USERINFO.sub(r"\1", line) + "\n" for line in lines)


def _split_header(text: str) -> tuple[str, str]:
    """A `[section "sub"]` line's header, and what follows it on the line."""
    quoted = escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "]" and not quoted:
            return text[: index + 1], text[index + 1 :].strip()
    return text, ""


def _continues(line: str) -> bool:
    """Whether a value goes on over the next line (an odd number of trailing backslashes)."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def extract(blob: bytes, target: Path, digest: str) -> None:
    """Extract a shipped repository into target (a new directory), read-only.

    Raises:
        ConfigError: it does not match its digest, or cannot be extracted.
    """
    if hashlib.sha256(blob).hexdigest() != digest:
        raise ConfigError("the shipped repository does not match its digest")
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
            archive.extractall(target, filter=_links_as_they_are)
    except (OSError, tarfile.TarError) as error:
        raise ConfigError(f"cannot extract the shipped repository: {error}") from None
    _read_only(target)


def _links_as_they_are(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """tarfile's data filter, except that symbolic links are kept wherever they point: the
    sandbox mounts the copy read-only and its tools read beneath the workspace only, as
    they do with the repository the local engine mounts."""
    if member.issym():
        name = os.path.normpath(member.name)
        if name.startswith(("/", "..")) or os.path.isabs(name):
            raise tarfile.OutsideDestinationError(member, path)
        return member
    return tarfile.data_filter(member, path)


def _read_only(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        Path(directory).chmod(0o555)


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
    """Remove a (read-only) directory tree, if it is there."""
    if not path.exists():
        return
    for directory, _, _ in os.walk(path):
        with contextlib.suppress(OSError):
            Path(directory).chmod(0o755)
    shutil.rmtree(path, ignore_errors=True)
