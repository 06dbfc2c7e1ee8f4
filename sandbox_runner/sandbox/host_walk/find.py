"""The workspace walked once by GNU find: the file tree of the workspace check and, from
the same walk, what the git guard's seed is made of.

find lists each directory once and lstats each entry once, in C: a million entries take
4.3 s, against 3.4 s for a bare `find -printf` and 10 s for a walk in Python. Its records
stream through a pipe into a digest and a compressor; the guard's parts (directories with
their stamps, links, git's own names, entries per directory) go to files of their own in
the same walk. A machine without GNU find walks in Python, with the same records and no seed.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from sandbox_runner.sandbox.host_walk.tree import DIGEST_PREFIX, FileTree

__all__ = ["SEED_PARTS", "SeedParts", "Walk", "gnu_find", "walk"]

RECORD = r"%P\0%y%m %s %T@\0%l\0"
"""One entry: its path, type+permissions size mtime, and link target (see tree.records)."""
_GIT_NAMES = (".git*", ".mailmap", "HEAD", "refs", "commondir")
_ANY_GIT_NAME = ("(", *" -o ".join(f"-name {name}" for name in _GIT_NAMES).split(), ")")
SEED_PARTS: dict[str, tuple[tuple[str, ...], str]] = {
    "dirs": (("-type", "d"), r"%P\0%D %i %m %s %T@ %C@ %d\0"),
    "links": (("-type", "l"), r"%P\0"),
    "names": (_ANY_GIT_NAME, r"%P\0%y\0"),
    "counts": ((), r"%h\0"),
}
"""The seed's side outputs: their tests, and what each prints (seed.py reads them)."""
log = logging.getLogger(__name__)

CHUNK = 1 << 20
BACKGROUND_NICENESS = 10
"""A walk beside the plans' first tool calls yields the CPU to them."""


@dataclass(frozen=True)
class SeedParts:
    """The seed's side outputs of a walk, read whole, and what the walk met."""

    files: dict[str, bytes]
    """Each of SEED_PARTS' outputs."""
    started_ns: int
    """The wall clock before the walk began (a ctime after it, less a tick, is racy)."""
    unreadable: tuple[str, ...]
    """Directories (relative) that could not be listed."""
    errors: int
    """find's complaints other than an entry gone meanwhile (each unreadable directory
    makes one: more means something else could not be read)."""
    excluded: str | None
    """The relative path left out of the walk, if any."""


@dataclass(frozen=True)
class Walk:
    """One walk: the file tree, and the guard's parts (None: not asked for, or no GNU find)."""

    tree: FileTree
    seed: SeedParts | None = None


@functools.cache
def gnu_find() -> str | None:
    """GNU find's path, if this machine has it (BSD and busybox find have no -printf)."""
    path = shutil.which("find")
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if b"GNU findutils" in version.stdout else None


def walk(
    workspace: os.PathLike[str] | str,
    *,
    exclude: os.PathLike[str] | str | None = None,
    time_limit: float | None = None,
    seed: bool = False,
    background: bool = False,
) -> Walk:
    """Walk the workspace (links not followed, the excluded directory left out): its file
    tree, and with SEED the guard's parts too. BACKGROUND: at a lower priority."""
    root = os.path.realpath(workspace)
    excluded = None if exclude is None else os.path.realpath(exclude)
    if excluded is not None and (excluded == root or not os.path.isdir(excluded)):
        excluded = None
    find = gnu_find()
    if find is not None:
        with tempfile.TemporaryDirectory(prefix="planrun-walk-") as scratch:
            try:
                return _find_walk(find, root, excluded, time_limit,
                                  Path(scratch) if seed else None, background)  # fmt: skip
            except OSError as error:  # find could not be started (no memory, no process)
                log.debug("find could not walk %s: %s", root, error)
    from sandbox_runner.sandbox.host_walk.python_walk import python_walk

    return Walk(python_walk(root, excluded, time_limit))


def _find_walk(
    find: str,
    root: str,
    excluded: str | None,
    time_limit: float | None,
    scratch: Path | None,
    background: bool,
) -> Walk:
    command = [find, "-H", "."]
    if excluded is not None:
        command += ["-samefile", excluded, "-prune", "-o"]
    command.append("(")
    if scratch is not None:
        for name, (tests, output) in SEED_PARTS.items():
            command += [*tests, "-fprintf", str(scratch / name), output, ","]
    command += ["-printf", RECORD, ")"]
    if background:
        command = ["nice", "-n", str(BACKGROUND_NICENESS), *command]
    started, started_ns = time.monotonic(), time.time_ns()
    process = subprocess.Popen(
        command,
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"LC_ALL": "C", "PATH": os.environ.get("PATH", os.defpath)},
    )
    errors: list[bytes] = []
    reader = threading.Thread(target=_read_errors, args=(process, errors), daemon=True)
    reader.start()
    deadline = None if time_limit is None else started + time_limit
    chunks: tuple[bytes, ...] = ()
    digest, separators, complete = "", 0, False
    try:
        digest, chunks, separators, complete = _consume(process, deadline)
    finally:  # past the deadline, or Ctrl-C: find stops too (else it writes its files out)
        if not complete:
            process.kill()
        process.wait()
        reader.join()
    seconds = time.monotonic() - started
    if not complete:
        return Walk(FileTree("", separators // 3, seconds, complete=False))
    prefix = os.fsencode(find) + b": "
    complaints = [line for line in errors if not _entry_gone(line, prefix)]
    stopped = _stopped(process.returncode, complaints, prefix)
    if stopped:
        return Walk(FileTree("", separators // 3, seconds, complete=False, stopped=stopped))
    files = None if scratch is None else {name: (scratch / name).read_bytes()
                                          for name in SEED_PARTS}  # fmt: skip
    unreadable = _unreadable(root, files, complaints)
    tree = FileTree(f"{DIGEST_PREFIX}{digest}", separators // 3, seconds, True, chunks,
                    tuple(unreadable) + _unexplained(complaints, len(unreadable)))  # fmt: skip
    if files is None:
        return Walk(tree)
    relative = None if excluded is None else os.path.relpath(excluded, root)
    parts = SeedParts(files, started_ns, tuple(unreadable), len(complaints), relative)
    return Walk(tree, parts)


def _consume(
    process: subprocess.Popen[bytes], deadline: float | None
) -> tuple[str, tuple[bytes, ...], int, bool]:
    """Digest and compress find's records as they come; stop at the deadline."""
    hasher, compressor = hashlib.sha256(), zlib.compressobj(1)
    chunks: list[bytes] = []
    separators = 0
    assert process.stdout is not None
    while chunk := process.stdout.read(CHUNK):
        hasher.update(chunk)
        separators += chunk.count(b"\0")
        if compressed := compressor.compress(chunk):
            chunks.append(compressed)
        if deadline is not None and time.monotonic() >= deadline:
            return "", (), separators, False
    chunks.append(compressor.flush())
    return hasher.hexdigest(), tuple(chunks), separators, True


def _read_errors(process: subprocess.Popen[bytes], errors: list[bytes]) -> None:
    assert process.stderr is not None
    errors += process.stderr.read().splitlines()


def _entry_gone(complaint: bytes, prefix: bytes) -> bool:
    """Whether find's complaint is of one entry gone between its directory's listing and
    its own look (such a complaint names the entry first: `find: './a': No such ...`)."""
    return complaint.startswith(prefix + b"'.") and complaint.endswith(
        b": No such file or directory"
    )


def _stopped(status: int, complaints: list[bytes], prefix: bytes) -> str:
    """Why find did not walk the whole tree ('' when it did): it died, or complained of
    no one entry. Going back up through `..` to a directory that was moved meanwhile, it
    says "failed to read file names from file system at or below '.': No such file or
    directory" and stops: the directories it had not finished have the stamps it saw,
    and listings short of what they hold."""
    if status not in (0, 1):
        return f"find ended with status {status}"
    for complaint in complaints:
        if not complaint.startswith(prefix + b"'."):
            return complaint.removeprefix(prefix).decode("utf-8", "replace")
    return ""


def _unreadable(root: str, files: dict[str, bytes] | None, complaints: list[bytes]) -> list[str]:
    """The directories find could not list: each made a complaint and shows no entries
    in the seed's parts FILES, if the walk made them (each is listed again here to tell
    it from an empty one)."""
    if not complaints:
        return []
    if files is None:
        candidates = _directories_of(root)
    else:
        counted = set(files["counts"].split(b"\0"))
        listed = files["dirs"].split(b"\0")[0::2]
        candidates = [path for path in listed if path and b"./" + path not in counted]
        candidates.append(b"")  # the workspace itself counts as one of its own entries
    found = []
    for path in candidates:
        name = os.fsdecode(path)
        try:
            with os.scandir(os.path.join(root, name)):
                pass
        except OSError:
            found.append(name or ".")
    return found


def _directories_of(root: str) -> list[bytes]:
    """Every directory under ROOT, relative (a walk without the seed's parts has no list
    of them: its unreadable ones are found again)."""
    from sandbox_runner.tree_walk import walk as tree_walk

    return [os.fsencode(directory.relative) for directory in tree_walk(root, skip_unlistable=True)]


def _unexplained(complaints: list[bytes], explained: int) -> tuple[str, ...]:
    """What find could not read beyond the directories found unreadable (an entry it could
    not stat, a read cut short), as find said it."""
    if len(complaints) <= explained:
        return ()
    extra = len(complaints) - explained
    first = complaints[-1].decode("utf-8", "replace").removeprefix("find: ")
    return (f"{extra} more that find could not read, such as {first}",)


def mode_of(kind: bytes, permissions: bytes) -> int:
    """A full st_mode from find's %y letter and %m octal permissions."""
    return _KINDS.get(kind, 0) | int(permissions, 8)


_KINDS = {
    b"f": stat.S_IFREG,
    b"d": stat.S_IFDIR,
    b"l": stat.S_IFLNK,
    b"p": stat.S_IFIFO,
    b"s": stat.S_IFSOCK,
    b"b": stat.S_IFBLK,
    b"c": stat.S_IFCHR,
}
